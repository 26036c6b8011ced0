"""glovebox tools as LangChain tools (``pip install 'glovebox-runtime[langchain]'``).

>>> from glovebox.integrations.langchain import tools
>>> callable(tools)
True

Each tool is a ``BaseTool`` whose ``args_schema`` is the tool's JSON Schema
(as object-only surfaces show it), whose ``invoke``/``run`` go through
``Runtime.call`` and ``ainvoke``/``arun`` through ``Runtime.acall``, as the
principal the tools were made for. A failed call raises ``ToolException``
inside the tool, which ``handle_tool_error=True`` turns into the tool's answer
(a ``ToolMessage`` with ``status="error"`` when invoked with a tool call), so
the agent loop goes on and the model reads the error line of
:func:`glovebox.integrations._common.error_text`.

Run inside a LangGraph graph (a ``ToolNode``, or any node, of a graph compiled
with a checkpointer), a call the policy holds for approval pauses the graph the
LangGraph way: the tool calls ``langgraph.types.interrupt`` with
``{"glovebox_approval_id": ..., "tool": ..., "principal": ...}``, which the
graph's answer carries under ``__interrupt__``. Decide the request in glovebox
(``Runtime.approve``/``deny``), then resume the thread with
``graph.invoke(Command(resume=...), config)``: the node runs again, and the call
with it, which runs once (approved) or answers the approver's reason (denied).
Outside a graph (LangChain has no pause of its own), or made with
``approvals="error"``, the approval is the error line naming its id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import approval_of, call_input, error_text, is_missing, missing_extra, output_text, parameters, visible

try:
    from langchain_core.tools import BaseTool, ToolException
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "langchain_core"):
        raise
    raise ImportError(missing_extra("langchain", "langchain-core")) from exc

__all__ = ["APPROVAL_KEY", "Approvals", "GloveboxTool", "tool", "tools"]

#: The key of glovebox's approval id in the value a paused graph's interrupt carries.
APPROVAL_KEY = "glovebox_approval_id"
#: ``"pause"``: in a LangGraph graph a held call interrupts it; ``"error"``: it is the error line.
Approvals = Literal["pause", "error"]


def _graph_interrupt() -> Callable[[Any], Any] | None:
    """LangGraph's ``interrupt`` when this call runs inside a graph that can pause (it has a
    checkpointer), else None (no langgraph, a plain LangChain call, or a graph without one)."""
    try:
        from langgraph.config import get_config
        from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
        from langgraph.types import interrupt
    except ImportError:
        return None
    try:
        config = get_config()
    except RuntimeError:  # not inside a runnable
        return None
    return interrupt if config.get(CONF, {}).get(CONFIG_KEY_CHECKPOINTER) is not None else None


class GloveboxTool(BaseTool):
    """One glovebox tool as a LangChain tool, called as one principal."""

    runtime: Any
    """The ``glovebox.Runtime`` that runs the calls."""
    info: Any
    """The ``ToolInfo`` of the tool, as listed when the tool was made."""
    principal: str | None = None
    """The principal every call is made as."""
    handle_tool_error: bool = True
    approvals: str = "pause"
    """``"pause"`` (inside a LangGraph graph a held call interrupts it) or ``"error"``."""

    def _run(self, /, *args: Any, **kwargs: Any) -> str:
        value = self._input(args, kwargs)
        result = self.runtime.call(self.info.name, value, principal=self.principal)
        if self._paused(result):  # resumed: the call made again answers with the decision
            result = self.runtime.call(self.info.name, value, principal=self.principal)
        return self._answer(result)

    async def _arun(self, /, *args: Any, **kwargs: Any) -> str:
        value = self._input(args, kwargs)
        result = await self.runtime.acall(self.info.name, value, principal=self.principal)
        if self._paused(result):
            result = await self.runtime.acall(self.info.name, value, principal=self.principal)
        return self._answer(result)

    def _paused(self, result: CallResult) -> bool:
        """Interrupt the graph on a held call (raises the first time; True once the graph resumes)."""
        waiting = approval_of(result)
        pause = _graph_interrupt() if waiting is not None and self.approvals == "pause" else None
        if pause is None:
            return False
        pause({APPROVAL_KEY: waiting, "tool": self.info.name, "principal": self.principal})
        return True

    def _input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # A dict args_schema hands the model's arguments over as keywords.
        return call_input(self.info, kwargs if not args else args[0])

    @staticmethod
    def _answer(result: CallResult) -> str:
        if not result.ok:
            raise ToolException(error_text(result))
        return output_text(result)


def tool(
    runtime: CallBackend, info: ToolInfo, *, principal: str | None = None, approvals: Approvals = "pause"
) -> GloveboxTool:
    """``info`` as a LangChain tool calling ``runtime`` as ``principal``."""
    if approvals not in ("pause", "error"):
        raise ValueError(f"approvals must be 'pause' or 'error', not {approvals!r}")
    return GloveboxTool(
        approvals=approvals,
        name=info.name,
        description=info.description or info.name,
        args_schema=parameters(info),
        runtime=runtime,
        info=info,
        principal=principal,
    )


def tools(
    runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None, approvals: Approvals = "pause"
) -> list[BaseTool]:
    """The tools ``principal`` may see, as LangChain tools.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.
        approvals: ``"pause"`` (inside a LangGraph graph a call held for approval interrupts it,
            resumed with ``Command(resume=...)``) or ``"error"`` (the error line, as outside a graph).

    Returns:
        One ``BaseTool`` per visible tool (newest version of each), sorted by name.
    """
    return [
        tool(runtime, info, principal=principal, approvals=approvals) for info in visible(runtime, principal, pattern)
    ]
