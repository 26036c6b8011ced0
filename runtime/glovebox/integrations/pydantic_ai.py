"""glovebox tools as pydantic-ai tools (``pip install 'glovebox-runtime[pydantic-ai]'``).

>>> from glovebox.integrations.pydantic_ai import tools
>>> callable(tools)
True

Each tool is a ``pydantic_ai.Tool`` made with ``Tool.from_schema``: its
parameters are the tool's JSON Schema (as object-only surfaces show it), and
it runs ``Runtime.acall`` as the principal the tools were made for. A failed
call reaches the model as the error line of
:func:`glovebox.integrations._common.error_text`: ``invalid_input`` raises
``ModelRetry`` (the model may correct its arguments, within the agent's retry
budget); any other failure raises ``ToolFailed`` (a failed tool result the
model adapts to, with no retry), or is returned as the tool's answer on a
pydantic-ai without ``ToolFailed``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import call_input, error_text, is_missing, missing_extra, output_text, parameters, visible

try:
    from pydantic_ai import ModelRetry, Tool
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "pydantic_ai"):
        raise
    raise ImportError(missing_extra("pydantic-ai", "pydantic-ai-slim")) from exc

try:
    from pydantic_ai.exceptions import ToolFailed
except ImportError:  # pragma: no cover - older pydantic-ai: the error is the tool's answer
    ToolFailed = None  # type: ignore[assignment,misc]

__all__ = ["tool", "tools"]


def _answer(result: CallResult) -> str:
    if result.ok:
        return output_text(result)
    text = error_text(result)
    if result.code == "invalid_input":
        raise ModelRetry(text)
    if ToolFailed is not None:
        raise ToolFailed(text)
    return text


def _function(runtime: CallBackend, info: ToolInfo, principal: str | None) -> Callable[..., Awaitable[str]]:
    async def call(**arguments: Any) -> str:
        return _answer(await runtime.acall(info.name, call_input(info, arguments), principal=principal))

    call.__name__ = info.name.replace("-", "_")
    return call


def tool(runtime: CallBackend, info: ToolInfo, *, principal: str | None = None) -> Tool[Any]:
    """``info`` as a pydantic-ai ``Tool`` calling ``runtime`` as ``principal``."""
    return Tool.from_schema(
        _function(runtime, info, principal),
        name=info.name,
        description=info.description or info.name,
        json_schema=parameters(info),
    )


def tools(runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None) -> list[Tool[Any]]:
    """The tools ``principal`` may see, as pydantic-ai ``Tool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.

    Returns:
        One ``Tool`` per visible tool (newest version of each), sorted by name.
    """
    return [tool(runtime, info, principal=principal) for info in visible(runtime, principal, pattern)]
