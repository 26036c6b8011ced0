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
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..model._result import CallResult, ToolInfo
from ..runtime._backend import CallBackend
from ._common import call_input, is_missing, missing_extra, parameters, result_text, visible

try:
    from llama_index.core.tools import FunctionTool, ToolMetadata, ToolOutput
except ModuleNotFoundError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    if not is_missing(exc, "llama_index"):
        raise
    raise ImportError(missing_extra("llama-index", "llama-index-core")) from exc

__all__ = ["JsonSchemaToolMetadata", "tool", "tools"]


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


def tool(runtime: CallBackend, info: ToolInfo, *, principal: str | None = None) -> FunctionTool:
    """``info`` as a LlamaIndex ``FunctionTool`` calling ``runtime`` as ``principal``."""

    def call(**arguments: Any) -> _Called:
        value = call_input(info, arguments)
        return _Called(value, runtime.call(info.name, value, principal=principal))

    async def acall(**arguments: Any) -> _Called:
        value = call_input(info, arguments)
        return _Called(value, await runtime.acall(info.name, value, principal=principal))

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
    return FunctionTool(fn=call, async_fn=acall, metadata=metadata, callback=answer)


def tools(runtime: CallBackend, *, principal: str | None = None, pattern: str | None = None) -> list[FunctionTool]:
    """The tools ``principal`` may see, as LlamaIndex ``FunctionTool`` objects.

    Args:
        runtime: the Runtime that runs the calls.
        principal: the principal that sees and calls the tools (None: ``anonymous``).
        pattern: an fnmatch pattern over tool names (``"text-*"``); None for all.

    Returns:
        One ``FunctionTool`` per visible tool (newest version of each), sorted by name.
    """
    return [tool(runtime, info, principal=principal) for info in visible(runtime, principal, pattern)]
