"""The one name matcher for policies: fnmatch-style patterns, case-sensitive.

``*`` matches any run of characters, ``?`` one character, ``[abc]`` one of a
set. A tool pattern containing ``@`` is matched against ``name@version``;
without one, against the name alone, so ``calc`` covers every version.
"""

from __future__ import annotations

import fnmatch
import functools
import re

__all__ = ["match_name", "match_tool"]


#: The characters that make a pattern more than a literal name.
_GLOB = frozenset("*?[")


@functools.lru_cache(maxsize=16384)  # an imported API's policy has one rule per tool: GitHub's, 1,223
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """The pattern's regex, or None for a literal (no ``*``, ``?`` or ``[``), compared as a string."""
    return re.compile(fnmatch.translate(pattern)) if _GLOB.intersection(pattern) else None


def match_name(pattern: str, name: str) -> bool:
    """Whether ``name`` matches the fnmatch-style ``pattern`` (case-sensitive).

    >>> match_name("text-*", "text-stats")
    True
    >>> match_name("text-*", "word-freq")
    False
    >>> match_name("agent-?", "agent-1")
    True
    >>> match_name("Calc", "calc")
    False
    >>> match_name("api.v1", "api.v1"), match_name("api.v1", "apixv1")  # a literal: compared as a string
    (True, False)
    """
    compiled = _compiled(pattern)
    return pattern == name if compiled is None else compiled.match(name) is not None


def match_tool(pattern: str, name: str, version: str) -> bool:
    """Whether a tool pattern matches a tool; ``@`` in the pattern brings the version in.

    >>> match_tool("calc", "calc", "1.0.0")
    True
    >>> match_tool("calc@1.*", "calc", "1.2.0")
    True
    >>> match_tool("calc@2.*", "calc", "1.2.0")
    False
    >>> match_tool("*", "primes", "0.0.1")
    True
    """
    if "@" in pattern:
        return match_name(pattern, f"{name}@{version}")
    return match_name(pattern, name)
