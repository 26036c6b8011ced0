"""Text statistics in pure Python: the same logic as guest/examples/text-stats/tool.c.

Used by the baselines (Python subprocess per call) so every contender does the same
work on the same input. Whitespace is exactly what the C tool treats as a separator:
space, newline, tab and carriage return.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^ \n\t\r]+")


def text_stats(text: str) -> dict[str, object]:
    """Return characters (code points), words, lines and UTF-8 bytes of ``text``."""
    lines = text.count("\n")
    if text and not text.endswith("\n"):
        lines += 1
    return {
        "characters": len(text),
        "words": sum(1 for _ in _WORD.finditer(text)),
        "lines": lines,
        "bytes": len(text.encode("utf-8")),
    }


def handle(payload: object) -> dict[str, object]:
    """Apply :func:`text_stats` to a ``{"text": str}`` payload; errors become a dict."""
    if not isinstance(payload, dict) or not isinstance(payload.get("text"), str):
        return {"error": 'input must be an object with a string field "text"'}
    return text_stats(payload["text"])
