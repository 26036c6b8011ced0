"""Text statistics as a Python tool: the same logic as bench/logic.py and the C text-stats example."""

import re

from glovebox_guest import tool

_WORD = re.compile(r"[^ \n\t\r]+")


@tool
def text_stats(text: str) -> dict[str, int]:
    """Count the characters, words, lines and bytes of a text."""
    lines = text.count("\n")
    if text and not text.endswith("\n"):
        lines += 1
    return {
        "characters": len(text),
        "words": sum(1 for _ in _WORD.finditer(text)),
        "lines": lines,
        "bytes": len(text.encode("utf-8")),
    }
