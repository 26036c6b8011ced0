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

A call the policy holds for approval interrupts the run the SDK's way
(``needs_approval``): the tool's approval check makes the call, and when
glovebox answers ``approval_required`` the run ends with an interruption
(``result.interruptions``) whose glovebox approval id :func:`approval_id`
gives. Decide the request in glovebox (``Runtime.approve``/``deny``), then
``state = result.to_state()``, ``state.approve(item)`` and ``Runner.run(agent,
state)``: the call is made again and runs once (approved), or answers the
approver's reason (denied); ``state.reject(item)`` answers the model without a
call. A call glovebox does not hold is made once, in the check, and its result
is the tool's answer. ``tools(..., approvals="error")`` keeps the former
behaviour: the approval is the error line naming its id.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import (
    approval_of,
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
    from agents import FunctionTool, RunContextWrapper, ToolApprovalItem
    from agents.tool_context import ToolContext
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "agents"):
        raise
    raise ImportError(missing_extra("openai-agents", "openai-agents")) from exc

__all__ = ["Approvals", "approval_id", "tool", "tools"]

#: ``"pause"``: a held call interrupts the run (``needs_approval``); ``"error"``: it is the error line.
Approvals = Literal["pause", "error"]
#: Tool call ids kept at most, each with its glovebox approval id or the result its approval check made.
_KEPT = 10_000
#: ``call_id`` -> the glovebox approval id the call waits for.
_WAITING: OrderedDict[str, str] = OrderedDict()


def _keep(kept: OrderedDict[str, Any], key: str, value: Any) -> None:
    kept[key] = value
    while len(kept) > _KEPT:
        kept.popitem(last=False)


def approval_id(item: ToolApprovalItem) -> str | None:
    """The glovebox approval id an interruption of a glovebox tool waits for (None for any other)."""
    call_id = getattr(item.raw_item, "call_id", None)
    return _WAITING.get(call_id) if isinstance(call_id, str) else None


class _Calls:
    """One tool's approval check and invocation: the check makes the call, the invocation answers it."""

    def __init__(self, runtime: CallBackend, info: ToolInfo, principal: str | None) -> None:
        self.runtime, self.info, self.principal = runtime, info, principal
        self.made: OrderedDict[str, CallResult] = OrderedDict()

    async def call(self, arguments: str) -> CallResult:
        value, refusal = parse_arguments(arguments)
        if refusal is not None:
            return refusal
        return await self.runtime.acall(self.info.name, call_input(self.info, value), principal=self.principal)

    async def needs_approval(self, context: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        result = await self.call(_arguments_of(context, params))
        waiting = approval_of(result)
        if waiting is not None:
            _keep(_WAITING, call_id, waiting)
            return True
        _keep(self.made, call_id, result)
        return False

    async def on_invoke_tool(self, context: ToolContext[Any], arguments: str) -> str:
        made = self.made.pop(context.tool_call_id, None)
        _WAITING.pop(context.tool_call_id, None)
        return result_text(made if made is not None else await self.call(arguments))


def _arguments_of(context: RunContextWrapper[Any], params: dict[str, Any]) -> str:
    """The model's arguments text (the SDK hands the approval check them parsed)."""
    arguments = getattr(context, "tool_arguments", None)
    return arguments if isinstance(arguments, str) else json.dumps(params)


def _invoker(
    runtime: CallBackend, info: ToolInfo, principal: str | None
) -> Callable[[ToolContext[Any], str], Awaitable[str]]:
    calls = _Calls(runtime, info, principal)

    async def on_invoke_tool(context: ToolContext[Any], arguments: str) -> str:
        return result_text(await calls.call(arguments))

    return on_invoke_tool


def tool(
    runtime: CallBackend, info: ToolInfo, *, principal: str | None = None, approvals: Approvals = "pause"
) -> FunctionTool:
    """``info`` as an OpenAI Agents ``FunctionTool`` calling ``runtime`` as ``principal``."""
    if approvals not in ("pause", "error"):
        raise ValueError(f"approvals must be 'pause' or 'error', not {approvals!r}")
    schema = parameters(info)
    if approvals == "error":
        invoke, needs = _invoker(runtime, info, principal), None
    else:
        calls = _Calls(runtime, info, principal)
        invoke, needs = calls.on_invoke_tool, calls.needs_approval
    made = FunctionTool(
        name=info.name,
        description=info.description or info.name,
        params_json_schema=schema,
        on_invoke_tool=invoke,
        strict_json_schema=strict_compatible(schema),
    )
    if needs is not None:
        made.needs_approval = needs
    return made


def tools(
    runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None, approvals: Approvals = "pause"
) -> list[FunctionTool]:
    """The tools ``principal`` may see, as OpenAI Agents ``FunctionTool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.
        approvals: ``"pause"`` (a call held for approval interrupts the run: ``result.interruptions``,
            resumed through ``RunState``) or ``"error"`` (the error line).

    Returns:
        One ``FunctionTool`` per visible tool (newest version of each), sorted by name.
    """
    return [
        tool(runtime, info, principal=principal, approvals=approvals) for info in visible(runtime, principal, pattern)
    ]
