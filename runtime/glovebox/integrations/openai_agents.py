"""glovebox tools as OpenAI Agents SDK tools (``pip install 'glovebox-runtime[openai-agents]'``).

>>> from glovebox.integrations.openai_agents import tools
>>> callable(tools)
True

Each tool is a ``FunctionTool`` whose ``params_json_schema`` is the tool's
JSON Schema (as object-only surfaces show it) and whose ``on_invoke_tool``
runs ``Runtime.acall`` as the principal the tools were made for. A tool is
strict (``strict_json_schema=True``) only when its schema already meets
strict mode unchanged (:func:`glovebox.integrations._common.strict_compatible`);
any other is offered non-strict, with its schema as it is. A failed call
answers the error line of :func:`glovebox.integrations._common.error_text`, the
SDK's way of sending a tool error back to the model; arguments that are not
JSON (or break the host's JSON rules) answer ``invalid_input`` the same way,
without a call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..model._result import ToolInfo
from ..runtime._backend import CallBackend
from ._common import (
    call_input,
    is_missing,
    missing_extra,
    parameters,
    parse_arguments,
    result_text,
    strict_compatible,
    visible,
)

try:
    from agents import FunctionTool
    from agents.tool_context import ToolContext
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "agents"):
        raise
    raise ImportError(missing_extra("openai-agents", "openai-agents")) from exc

__all__ = ["tool", "tools"]


def _invoker(
    runtime: CallBackend, info: ToolInfo, principal: str | None
) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> str:
        value, refusal = parse_arguments(arguments)
        if refusal is not None:
            return result_text(refusal)
        result = await runtime.acall(info.name, call_input(info, value), principal=principal)
        return result_text(result)

    return on_invoke_tool


def tool(runtime: CallBackend, info: ToolInfo, *, principal: str | None = None) -> FunctionTool:
    """``info`` as an OpenAI Agents ``FunctionTool`` calling ``runtime`` as ``principal``."""
    schema = parameters(info)
    return FunctionTool(
        name=info.name,
        description=info.description or info.name,
        params_json_schema=schema,
        on_invoke_tool=_invoker(runtime, info, principal),
        strict_json_schema=strict_compatible(schema),
    )


def tools(runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None) -> list[FunctionTool]:
    """The tools ``principal`` may see, as OpenAI Agents ``FunctionTool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.

    Returns:
        One ``FunctionTool`` per visible tool (newest version of each), sorted by name.
    """
    return [tool(runtime, info, principal=principal) for info in visible(runtime, principal, pattern)]
