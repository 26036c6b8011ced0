"""Tool definitions for LLM APIs: OpenAI function tools and Anthropic tools.

Both APIs need a JSON object at the root of a tool's parameters. A tool whose
input schema is not an object schema (``{"type": "string"}``, ``true``) is
exported as ``{"input": <its schema>}``, the rule every object-only surface
follows (``glovebox.schema._objectroot``), and :func:`tool_input` turns the arguments
a model sends back into the tool's input.

Both APIs accept tool names of ``[a-zA-Z0-9_-]{1,64}``; registered names
(``[a-z0-9][a-z0-9_-]{0,63}``) already fit, so a tool is exported under its
own name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..model._result import ToolInfo
from ..schema._objectroot import input_parameters, unwrap_input

__all__ = ["FORMATS", "export_tools", "tool_input", "tool_name_map"]

FORMATS = ("openai", "anthropic")


def export_tools(infos: Iterable[ToolInfo], fmt: str) -> list[dict[str, Any]]:
    """The definitions of ``infos`` for ``fmt`` (``"openai"`` or ``"anthropic"``).

    The parameters (OpenAI) or input schema (Anthropic) of each is an object
    schema: the tool's own when it is one, else ``{"input": <its schema>}``.

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = []
    for info in infos:
        name, description, schema = info.name, info.description, input_parameters(info.input_schema)
        if fmt == "openai":
            out.append(
                {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
            )
        else:
            out.append({"name": name, "description": description, "input_schema": schema})
    return out


def tool_name_map(infos: Iterable[ToolInfo]) -> dict[str, str]:
    """Exported name → registered name, to turn a model's tool call back into ``Runtime.call``.

    The two are the same string (registered names already fit both APIs), so
    the map's use is to refuse a name the model made up: it is not a key.
    """
    return {info.name: info.name for info in infos}


def tool_input(info: ToolInfo, arguments: Any) -> Any:
    """The input to call ``info`` with, from the arguments a model sent for its exported definition.

    For a tool exported as ``{"input": <its schema>}`` that is ``arguments["input"]``;
    for any other tool, ``arguments`` unchanged. Arguments of the wrong shape
    pass unchanged too, so that the call's input validation names what is wrong.

    >>> from glovebox import Manifest
    >>> manifest = Manifest(name="shout", input_schema={"type": "string"})
    >>> info = ToolInfo(manifest=manifest, digest="", registered_at="", size_bytes=0)
    >>> tool_input(info, {"input": "hello"})
    'hello'
    """
    return unwrap_input(info.input_schema, arguments)
