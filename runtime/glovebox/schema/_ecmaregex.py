"""ECMA-262 regular expressions for JSON Schema: linear-time where possible, else under a time budget.

JSON Schema's ``pattern`` and ``patternProperties`` are ECMA-262 regexes.
Python's ``re`` speaks another dialect (``\\d`` matches any Unicode digit,
``$`` matches before a final newline, ``\\p{Letter}`` is an error) and never
gives up: ``^(a|a)+$`` against forty ``a`` and a ``b`` backtracks for minutes
while holding the GIL.

Two engines answer, and :func:`search` picks per pattern and per text:

- **linear** (:func:`linear`): jsonschema-rs's ECMA-262 patterns on Rust's
  ``regex`` crate, which never backtracks: ``^(a|a)+$`` is answered in
  microseconds. It holds the GIL and its cost per byte, though linear, grows
  with the pattern (a DFA-hostile ``a[ab]{20}c`` costs ~2 µs a byte), so it
  takes only patterns whose program fits ``LINEAR_SIZE_LIMIT`` and texts of at
  most ``LINEAR_MAX_CHARS``. It is not used for a pattern it cannot compile
  (lookaround, backreferences, ``[]``, ``[^]``, ``\\0``, surrogate escapes) nor
  for ``\\b``/``\\B``, which it reads as Unicode word boundaries where
  ECMA-262 says ASCII.
- **budgeted**: the pattern translated into the syntax of the ``regex`` module,
  compiled once, and matched with a ``timeout`` and with the GIL released
  (``concurrent=True``). ``regex`` is imported on first use. The translation is
  hand-written on purpose: ``regress``, the ECMA-262 engine packaged for
  Python, backtracks with no way to bound a match's time.

Every pattern must pass the translation (it is the ECMA-262 syntax check, and
what registration applies), whichever engine then runs it.

Translation: ``\\d \\w \\s`` (and ``\\D \\W \\S``, ``\\b \\B``) get their ECMA
meaning (ASCII digits and word characters, Unicode white space), ``.`` stops at
every line terminator, ``$`` matches only at the end, ``\\cX``, ``\\u{...}``,
``\\k<name>``, ``[]`` and ``[^]`` are rewritten, and syntax ECMA-262 lacks
(``(?i)``, ``(?P<x>...)``, ``\\A``, unknown escapes) is refused.

>>> search("^\\\\d+$", "42"), search("^\\\\d+$", "٤٢"), search("^abc$", "abc\\n")
(True, False, False)
>>> search("\\\\p{Letter}cole", "école")
True
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = [
    "DEFAULT_BUDGET_S",
    "LINEAR_MAX_CHARS",
    "LINEAR_SIZE_LIMIT",
    "PatternError",
    "PatternTimeout",
    "compile_pattern",
    "linear",
    "linear_options",
    "search",
    "time_budget",
]

#: Seconds one match may take when no budget is in force.
DEFAULT_BUDGET_S = 1.0
#: The largest compiled program (bytes) a pattern may have to run in the linear engine.
LINEAR_SIZE_LIMIT = 2 * 1024 * 1024
#: The longest text the linear engine matches: at its worst (~6 µs a character on this
#: project's 2-core VM, a DFA-hostile pattern near the size limit) that is ~0.2 s with the
#: GIL held. Longer texts go to the budgeted engine, which lets go of the GIL and stops in time.
LINEAR_MAX_CHARS = 32 * 1024
_MAX = 0x10FFFF
_DIGIT = ((0x30, 0x39),)
_WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
_SPACE = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_SIMPLE = {"t": r"\t", "n": r"\n", "v": r"\x0b", "f": r"\x0c", "r": r"\r"}
_SYNTAX = set("^$\\.*+?()[]{}|/-")
_GROUPS = ("(?:", "(?=", "(?!", "(?<=", "(?<!")
_local = threading.local()


class PatternError(ValueError):
    """A pattern that is not an ECMA-262 regex this host can run."""


class PatternTimeout(Exception):
    """Matching ``pattern`` ran out of time."""

    def __init__(self, pattern: str) -> None:
        super().__init__(pattern)
        self.pattern = pattern


@contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Let every match on this thread inside the block share ``seconds`` in all."""
    previous = getattr(_local, "deadline", None)
    _local.deadline = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.deadline = previous


def search(pattern: str, text: str) -> bool:
    """Whether ECMA-262 ``pattern`` matches somewhere in ``text``.

    Raises:
        PatternError: the pattern is not a usable ECMA-262 regex.
        PatternTimeout: the match outran the budget (see :func:`time_budget`).
    """
    deadline = getattr(_local, "deadline", None)
    remaining = DEFAULT_BUDGET_S if deadline is None else deadline - time.monotonic()
    if remaining <= 0:
        raise PatternTimeout(pattern)
    if len(text) <= LINEAR_MAX_CHARS:
        matches = linear(pattern)
        if matches is not None:
            return matches(text)
    compiled = compile_pattern(pattern)
    try:
        return compiled.search(text, timeout=remaining, concurrent=True) is not None
    except TimeoutError as exc:
        raise PatternTimeout(pattern) from exc


@functools.lru_cache(maxsize=1024)
def compile_pattern(pattern: str) -> Any:
    """The compiled ``regex`` pattern of an ECMA-262 regex.

    Raises:
        PatternError: the pattern does not translate or does not compile.
    """
    import regex  # type: ignore[import-untyped]  # the first pattern pays for it, not `import glovebox`

    translated = translate(pattern)
    try:
        return regex.compile(translated, flags=regex.VERSION0)
    except (regex.error, ValueError, OverflowError) as exc:
        raise PatternError(f"{pattern!r} is not a valid regex: {exc}") from exc


@functools.lru_cache(maxsize=1024)
def linear(pattern: str) -> Callable[[str], bool] | None:
    """Whether ECMA-262 ``pattern`` matches a text, answered in linear time; None when the
    linear engine cannot run it as ECMA-262 says (see the module docstring).

    >>> linear("^(a|a)+$")("a" * 40 + "b"), linear("(?<=a)b"), linear("\\\\bx")
    (False, None, None)

    Raises:
        PatternError: the pattern is not a usable ECMA-262 regex.
    """
    translate(pattern)
    if _has_word_boundary(pattern):
        return None
    import jsonschema_rs

    try:
        validator = jsonschema_rs.validator_for({"pattern": pattern}, pattern_options=linear_options())
    except (ValueError, OverflowError):
        return None  # needs backtracking, or its program is over LINEAR_SIZE_LIMIT
    return validator.is_valid


@functools.cache
def linear_options() -> Any:
    """The jsonschema-rs pattern options of the linear engine."""
    import jsonschema_rs

    return jsonschema_rs.RegexOptions(size_limit=LINEAR_SIZE_LIMIT, dfa_size_limit=LINEAR_SIZE_LIMIT)


def _has_word_boundary(pattern: str) -> bool:
    """Whether ``pattern`` has ``\\b`` or ``\\B`` outside a class (inside one, ``\\b`` is a backspace)."""
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if not in_class and pattern[i + 1 : i + 2] in ("b", "B"):
                return True
            i += 2
            continue
        if char == "[":
            in_class = True
        elif char == "]":
            in_class = False
        i += 1
    return False


def translate(pattern: str) -> str:
    """The ``regex``-module source of an ECMA-262 pattern.

    >>> translate("^a.$")
    '^a[^\\\\n\\\\r\\\\u2028\\\\u2029]\\\\Z'
    """
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            piece, i = _escape(pattern, i + 1, in_class)
        elif in_class:
            piece, i = _class_char(pattern, i)
            in_class = char != "]"
        else:
            piece, i, in_class = _outside(pattern, i)
        out.append(piece)
    if in_class:
        raise PatternError(f"{pattern!r} is not a valid regex: unterminated character class")
    return "".join(out)


def _outside(pattern: str, i: int) -> tuple[str, int, bool]:
    """One unescaped character outside a class: (translation, next index, now in a class)."""
    char = pattern[i]
    if char == ".":
        return r"[^\n\r\u2028\u2029]", i + 1, False
    if char == "$":
        return r"\Z", i + 1, False
    if char == "(" and pattern.startswith("(?", i):
        return _group(pattern, i), i + 2, False
    if char == "[":
        if pattern.startswith("[]", i):
            return "(?!)", i + 2, False
        if pattern.startswith("[^]", i):
            return "(?s:.)", i + 3, False
        if pattern.startswith("[^", i):
            return "[^", i + 2, True
        return "[", i + 1, True
    return char, i + 1, False


def _group(pattern: str, i: int) -> str:
    if pattern.startswith(_GROUPS, i):
        return "(?"
    if pattern.startswith("(?<", i) and pattern[i + 3 : i + 4].isidentifier():
        return "(?"
    raise PatternError(f"{pattern!r} is not an ECMA-262 regex: unsupported group syntax at {i}")


def _class_char(pattern: str, i: int) -> tuple[str, int]:
    char = pattern[i]
    if char in "[&~|":
        return "\\" + char, i + 1  # literal in ECMA; would start set operations in `regex`
    return char, i + 1


def _escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """Translate the escape whose letter is at ``pattern[i]``; return (translation, next index)."""
    if i >= len(pattern):
        raise PatternError(f"{pattern!r} is not a valid regex: a trailing backslash")
    char = pattern[i]
    shorthand = _shorthand(char, in_class)
    if shorthand is not None:
        return shorthand, i + 1
    if char in _SIMPLE:
        return _SIMPLE[char], i + 1
    if char in "bB":
        return (r"\x08" if in_class else rf"(?a:\{char})"), i + 1
    if char == "c" and i + 1 < len(pattern) and pattern[i + 1].isascii() and pattern[i + 1].isalpha():
        return f"\\x{ord(pattern[i + 1]) % 32:02x}", i + 2
    if char == "u" and pattern.startswith("u{", i):
        end = pattern.find("}", i)
        return _code_point(pattern, pattern[i + 2 : end] if end > 0 else ""), end + 1
    if char == "k" and pattern.startswith("k<", i) and not in_class:
        end = pattern.find(">", i)
        if end > 0 and pattern[i + 2 : end].isidentifier():
            return f"(?P={pattern[i + 2 : end]})", end + 1
    if char in "xupP0123456789" or char in _SYNTAX:
        return "\\" + char, i + 1
    raise PatternError(f"{pattern!r} is not an ECMA-262 regex: unknown escape \\{char}")


def _shorthand(char: str, in_class: bool) -> str | None:
    """The ECMA meaning of ``\\d \\D \\w \\W \\s \\S``, as class contents or a class."""
    sets = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
    ranges = sets.get(char.lower())
    if ranges is None:
        return None
    if char.isupper():
        ranges = _complement(ranges)
    body = "".join(f"\\U{low:08x}" if low == high else f"\\U{low:08x}-\\U{high:08x}" for low, high in ranges)
    return body if in_class else f"[{body}]"


def _complement(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    result, start = [], 0
    for low, high in ranges:
        if low > start:
            result.append((start, low - 1))
        start = high + 1
    if start <= _MAX:
        result.append((start, _MAX))
    return tuple(result)


def _code_point(pattern: str, digits: str) -> str:
    try:
        value = int(digits, 16)
    except ValueError:
        value = -1
    if not 0 <= value <= _MAX:
        raise PatternError(f"{pattern!r} is not a valid regex: bad \\u{{...}} escape")
    return f"\\U{value:08x}"
