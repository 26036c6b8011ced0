"""glovebox tools as LlamaIndex tools (``pip install 'glovebox-runtime[llama-index]'``).

>>> from glovebox.integrations.llama_index import tools
>>> callable(tools)
True

Each tool is a ``FunctionTool`` with a sync function (``Runtime.call``) and an
async one (``Runtime.acall``) as the principal the tools were made for, and
metadata whose parameters are the tool's JSON Schema (as object-only surfaces
show it). A failed call answers a ``ToolOutput`` with ``is_error=True`` whose
text is the error line of :func:`glovebox.integrations._common.error_text`;
``raw_output`` holds the whole envelope.

Inside a workflow (an ``AgentWorkflow`` or ``FunctionAgent`` hands its tools
the run's ``Context``), a call the policy holds for approval pauses the agent
the LlamaIndex way (human in the loop): the tool writes an
:class:`ApprovalRequested` (an ``InputRequiredEvent`` carrying glovebox's
``approval_id``) to the event stream and waits for a ``HumanResponseEvent``
with the same ``approval_id``. Decide the request in glovebox
(``Runtime.approve``/``deny``), then send that event
(``handler.ctx.send_event(HumanResponseEvent(response="decided",
approval_id=...))``): the call is made again and runs once (approved), or
answers the approver's reason (denied). Called outside a workflow, or made
with ``approvals="error"``, the approval is a failed ``ToolOutput`` naming its id.
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import approval_of, call_input, is_missing, missing_extra, parameters, result_text, visible

try:
    from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
    from llama_index.core.workflow import Context, HumanResponseEvent, InputRequiredEvent
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "llama_index"):
        raise
    raise ImportError(missing_extra("llama-index", "llama-index-core")) from exc

__all__ = ["ApprovalRequested", "Approvals", "JsonSchemaToolMetadata", "tool", "tools"]

#: ``"pause"``: a held call waits for a ``HumanResponseEvent`` in a workflow; ``"error"``: a failed output.
Approvals = Literal["pause", "error"]


class ApprovalRequested(InputRequiredEvent):
    """A glovebox tool's call waits for approval ``approval_id``: decide it, then answer with a
    ``HumanResponseEvent`` carrying the same ``approval_id``."""

    approval_id: str
    tool_name: str
    principal: str | None = None


@dataclass
class JsonSchemaToolMetadata(ToolMetadata):
    """``ToolMetadata`` whose parameters are a JSON Schema rather than a pydantic model."""

    fn_schema: type[Any] | None = None
    parameters: dict[str, Any] = field(default_factory=dict)

    def get_parameters_dict(self) -> dict[str, Any]:
        return dict(self.parameters)

    @property
    def fn_schema_str(self) -> str:
        return json.dumps(self.parameters, ensure_ascii=False)


@dataclass(frozen=True)
class _Called:
    """What the tool's function hands to its callback: the input it called with and the result."""

    input: Any
    result: CallResult


#: The signature the workflow reads to hand a tool its ``Context`` (by the annotation, which must be the class).
_WITH_CONTEXT = inspect.Signature(
    [
        inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context, default=None),
        inspect.Parameter("arguments", inspect.Parameter.VAR_KEYWORD),
    ]
)


def tool(
    runtime: CallBackend, info: ToolInfo, *, principal: str | None = None, approvals: Approvals = "pause"
) -> FunctionTool:
    """``info`` as a LlamaIndex ``FunctionTool`` calling ``runtime`` as ``principal``."""
    if approvals not in ("pause", "error"):
        raise ValueError(f"approvals must be 'pause' or 'error', not {approvals!r}")

    def call(ctx: Any = None, **arguments: Any) -> _Called:
        value = call_input(info, arguments)
        return _Called(value, runtime.call(info.name, value, principal=principal))

    async def acall(ctx: Any = None, **arguments: Any) -> _Called:
        value = call_input(info, arguments)
        result = await runtime.acall(info.name, value, principal=principal)
        waiting = approval_of(result)
        if waiting is None or ctx is None:
            return _Called(value, result)
        # The workflow replays this step when the answer arrives: the call made again runs once approved.
        asked = ApprovalRequested(approval_id=waiting, tool_name=info.name, principal=principal)
        await ctx.wait_for_event(
            HumanResponseEvent, waiter_event=asked, waiter_id=f"glovebox-approval-{waiting}",
            requirements={"approval_id": waiting}, timeout=None,
        )  # fmt: skip
        return _Called(value, await runtime.acall(info.name, value, principal=principal))

    if approvals == "pause":
        call.__signature__ = acall.__signature__ = _WITH_CONTEXT  # type: ignore[attr-defined]

    def answer(called: _Called) -> ToolOutput:
        return ToolOutput(
            tool_name=info.name,
            content=result_text(called.result),
            raw_input={"kwargs": {"input": called.input}},
            raw_output=called.result.to_dict(),
            is_error=not called.result.ok,
        )

    metadata = JsonSchemaToolMetadata(
        description=info.description or info.name, name=info.name, parameters=parameters(info)
    )
    # ctx=None unless a workflow hands its Context: the tool is called outside one too.
    partial = {"ctx": None} if approvals == "pause" else None
    return FunctionTool(fn=call, async_fn=acall, metadata=metadata, callback=answer, partial_params=partial)


def tools(
    runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None, approvals: Approvals = "pause"
) -> list[FunctionTool]:
    """The tools ``principal`` may see, as LlamaIndex ``FunctionTool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.
        approvals: ``"pause"`` (in a workflow, a call held for approval waits for a
            ``HumanResponseEvent``; see :class:`ApprovalRequested`) or ``"error"`` (a failed output).

    Returns:
        One ``FunctionTool`` per visible tool (newest version of each), sorted by name.
    """
    return [
        tool(runtime, info, principal=principal, approvals=approvals) for info in visible(runtime, principal, pattern)
    ]
