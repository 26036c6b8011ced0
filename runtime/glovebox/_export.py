"""Tool definitions for LLM APIs: OpenAI function tools and Anthropic tools.

Names are sanitised to the characters both APIs accept (``[a-zA-Z0-9_-]``,
at most 64), so ``text.stats`` becomes ``text_stats``; :func:`tool_name_map`
gives the way back from an exported name to the registered one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ._result import ToolInfo

__all__ = ["FORMATS", "export_name", "export_tools", "tool_name_map"]

FORMATS = ("openai", "anthropic")
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def export_name(name: str) -> str:
    """A tool name in the charset LLM APIs accept.

    >>> export_name("text.stats@1")
    'text_stats_1'
    """
    return _NOT_ALLOWED.sub("_", name)[:64] or "_"


def _parameters(info: ToolInfo) -> dict[str, Any]:
    schema = info.input_schema
    if schema is True or not isinstance(schema, dict):
        return {"type": "object", "properties": {}}  # both APIs require an object schema
    return schema


def export_tools(infos: Iterable[ToolInfo], fmt: str) -> list[dict[str, Any]]:
    """The definitions of ``infos`` for ``fmt`` (``"openai"`` or ``"anthropic"``).

    Raises:
        ValueError: an unknown format.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = []
    for info in infos:
        name, description, schema = export_name(info.name), info.description, _parameters(info)
        if fmt == "openai":
            out.append(
                {"type": "function", "function": {"name": name, "description": description, "parameters": schema}}
            )
        else:
            out.append({"name": name, "description": description, "input_schema": schema})
    return out


def tool_name_map(infos: Iterable[ToolInfo]) -> dict[str, str]:
    """Exported name → registered name, to turn a model's tool call back into ``Runtime.call``."""
    return {export_name(info.name): info.name for info in infos}
