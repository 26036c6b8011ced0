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

A call the policy holds for approval pauses the agent the pydantic-ai way (a
deferred tool): the tool raises ``ApprovalRequired`` with glovebox's approval
id in its metadata (``{"glovebox_approval_id": ...}``), so an agent whose
``output_type`` includes ``DeferredToolRequests`` ends its run with them
(:func:`approval_ids` maps each tool call to its approval id). Decide the
request in glovebox (``Runtime.approve``/``deny``), then run the agent again
with the messages and ``DeferredToolResults(approvals={call_id: True})``: the
call is made again and runs once (approved), or its failed result carries the
approver's reason (denied); ``ToolDenied(...)`` instead answers the model
without a call. ``tools(..., approvals="error")`` keeps the former behaviour:
the approval is a failed result naming its id.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import (
    approval_of,
    call_input,
    error_text,
    is_missing,
    missing_extra,
    output_text,
    parameters,
    visible,
)

try:
    from pydantic_ai import ApprovalRequired, DeferredToolRequests, ModelRetry, RunContext, Tool
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "pydantic_ai"):
        raise
    raise ImportError(missing_extra("pydantic-ai", "pydantic-ai-slim")) from exc

try:
    from pydantic_ai.exceptions import ToolFailed
except ImportError:  # pragma: no cover - older pydantic-ai: the error is the tool's answer
    ToolFailed = None  # type: ignore[assignment,misc]

__all__ = ["APPROVAL_KEY", "Approvals", "approval_ids", "tool", "tools"]

#: The key of glovebox's approval id in a deferred call's metadata.
APPROVAL_KEY = "glovebox_approval_id"
#: ``"pause"``: a held call pauses the agent (``ApprovalRequired``); ``"error"``: it is a failed result.
Approvals = Literal["pause", "error"]


def _answer(result: CallResult) -> str:
    if result.ok:
        return output_text(result)
    text = error_text(result)
    if result.code == "invalid_input":
        raise ModelRetry(text)
    if ToolFailed is not None:
        raise ToolFailed(text)
    return text


def _function(
    runtime: CallBackend, info: ToolInfo, principal: str | None, approvals: Approvals
) -> Callable[..., Awaitable[str]]:
    async def call(ctx: RunContext[Any], **arguments: Any) -> str:
        result = await runtime.acall(info.name, call_input(info, arguments), principal=principal)
        approval_id = approval_of(result)
        # Once the run was resumed with this call approved, a request still open is answered, not paused on again.
        if approval_id is not None and approvals == "pause" and not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={APPROVAL_KEY: approval_id, "tool": info.name})
        return _answer(result)

    call.__name__ = info.name.replace("-", "_")
    return call


def approval_ids(requests: DeferredToolRequests) -> dict[str, str]:
    """``{tool_call_id: glovebox approval id}`` of the calls a run paused on (its ``DeferredToolRequests``)."""
    found = {call.tool_call_id: requests.metadata.get(call.tool_call_id, {}) for call in requests.approvals}
    return {call_id: meta[APPROVAL_KEY] for call_id, meta in found.items() if APPROVAL_KEY in meta}


def tool(
    runtime: CallBackend, info: ToolInfo, *, principal: str | None = None, approvals: Approvals = "pause"
) -> Tool[Any]:
    """``info`` as a pydantic-ai ``Tool`` calling ``runtime`` as ``principal``."""
    if approvals not in ("pause", "error"):
        raise ValueError(f"approvals must be 'pause' or 'error', not {approvals!r}")
    return Tool.from_schema(
        _function(runtime, info, principal, approvals),
        name=info.name,
        description=info.description or info.name,
        json_schema=parameters(info),
        takes_ctx=True,
    )


def tools(
    runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None, approvals: Approvals = "pause"
) -> list[Tool[Any]]:
    """The tools ``principal`` may see, as pydantic-ai ``Tool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.
        approvals: ``"pause"`` (a call held for approval pauses the agent as a deferred tool call;
            give the agent ``output_type=[..., DeferredToolRequests]``) or ``"error"`` (a failed result).

    Returns:
        One ``Tool`` per visible tool (newest version of each), sorted by name.
    """
    return [
        tool(runtime, info, principal=principal, approvals=approvals) for info in visible(runtime, principal, pattern)
    ]
