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
"""

from __future__ import annotations

from typing import Any

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import call_input, error_text, is_missing, missing_extra, output_text, parameters, visible

try:
    from langchain_core.tools import BaseTool, ToolException
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "langchain_core"):
        raise
    raise ImportError(missing_extra("langchain", "langchain-core")) from exc

__all__ = ["GloveboxTool", "tool", "tools"]


class GloveboxTool(BaseTool):
    """One glovebox tool as a LangChain tool, called as one principal."""

    runtime: Any
    """The ``glovebox.Runtime`` that runs the calls."""
    info: Any
    """The ``ToolInfo`` of the tool, as listed when the tool was made."""
    principal: str | None = None
    """The principal every call is made as."""
    handle_tool_error: bool = True

    def _run(self, /, *args: Any, **kwargs: Any) -> str:
        return self._answer(self.runtime.call(self.info.name, self._input(args, kwargs), principal=self.principal))

    async def _arun(self, /, *args: Any, **kwargs: Any) -> str:
        result = await self.runtime.acall(self.info.name, self._input(args, kwargs), principal=self.principal)
        return self._answer(result)

    def _input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        # A dict args_schema hands the model's arguments over as keywords.
        return call_input(self.info, kwargs if not args else args[0])

    @staticmethod
    def _answer(result: CallResult) -> str:
        if not result.ok:
            raise ToolException(error_text(result))
        return output_text(result)


def tool(runtime: CallBackend, info: ToolInfo, *, principal: str | None = None) -> GloveboxTool:
    """``info`` as a LangChain tool calling ``runtime`` as ``principal``."""
    return GloveboxTool(
        name=info.name,
        description=info.description or info.name,
        args_schema=parameters(info),
        runtime=runtime,
        info=info,
        principal=principal,
    )


def tools(runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None) -> list[BaseTool]:
    """The tools ``principal`` may see, as LangChain tools.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.

    Returns:
        One ``BaseTool`` per visible tool (newest version of each), sorted by name.
    """
    return [tool(runtime, info, principal=principal) for info in visible(runtime, principal, pattern)]
