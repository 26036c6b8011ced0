"""The rules every JSON value crossing the host boundary obeys, in one place.

Inputs (a Python value given to ``Runtime.call``, JSON text from the CLI, the
HTTP API or MCP) and tool outputs are held to the same rules:

- nesting: at most ``MAX_DEPTH`` levels of arrays and objects;
- numbers: at most ``MAX_NUMBER_CHARS`` characters of JSON text (an integer of
  at most that many digits from Python), and finite (no ``NaN``, no
  ``Infinity``, no ``1e999`` that overflows a double);
- strings (object keys included): valid Unicode, so a lone surrogate, whether
  a raw character or a ``\\ud800`` escape without its partner, is refused.

Violations raise :class:`JsonRejected`, whose text says what was wrong and
where; callers turn it into ``invalid_input`` or ``invalid_output``. Values are
walked with an explicit stack, never by recursion, so a hostile value cannot
exhaust the interpreter's stack here.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._canonical import json_encoder

__all__ = [
    "MAX_DEPTH",
    "MAX_NUMBER_CHARS",
    "JsonRejected",
    "check_value",
    "checked_text",
    "encode",
    "escape_surrogates",
    "loads",
]

#: Deepest nesting of arrays and objects (``[[1]]`` is 2 levels).
MAX_DEPTH = 64
#: Longest number, in characters of JSON text (sign, digits, fraction, exponent).
MAX_NUMBER_CHARS = 1000
# Integers below 2**_SURE_BITS have fewer than MAX_NUMBER_CHARS digits; from
# 2**_OVER_BITS on they have more (log10(2) = 0.30103).
_SURE_BITS = int((MAX_NUMBER_CHARS - 1) / 0.30103)
_OVER_BITS = int(MAX_NUMBER_CHARS / 0.30103) + 2


class JsonRejected(ValueError):
    """A JSON text or value that breaks a rule; ``str()`` reads after "input" or "the output".

    Attributes:
        details: where and which limit (``path``, ``max_depth``, ``max_number_chars``).
    """

    def __init__(self, problem: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(problem)
        self.details = details or {}


def loads(data: str | bytes) -> Any:
    """Parse JSON text under the rules above.

    Bytes are decoded as UTF-8 (or UTF-16/32 when the text says so, as
    ``json.loads`` does), strictly.

    Raises:
        JsonRejected: the text is not JSON, or breaks a rule.
    """
    text = _decode(data) if isinstance(data, bytes) else data
    # A text no longer than MAX_NUMBER_CHARS holds no number that long: its integers are
    # read by the C scanner itself instead of a Python hook per integer.
    decoder = _SHORT_DECODER if len(text) <= MAX_NUMBER_CHARS else _DECODER
    try:
        value = _scanned(decoder, text)
    except json.JSONDecodeError as exc:
        raise JsonRejected(f"is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise _too_deep(()) from exc
    if text.count("[") + text.count("{") > MAX_DEPTH or "\\u" in text or escape_surrogates(text) != text:
        check_value(value)  # only then can the value be too deep or hold a lone surrogate
    return value


def check_value(value: Any) -> None:
    """Check a Python value bound for JSON: nesting, integer size, strings.

    Other types (and non-finite floats) are left to the JSON encoder, which
    refuses them.

    Raises:
        JsonRejected: the value breaks a rule.
    """
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            _enter(path)
            for key, child in item.items():
                if isinstance(key, str):
                    _check_str(key, path)
                stack.append((child, (*path, key)))
        elif isinstance(item, list | tuple):
            _enter(path)
            stack.extend((child, (*path, index)) for index, child in enumerate(item))
        elif isinstance(item, str):
            _check_str(item, path)
        elif isinstance(item, int) and not isinstance(item, bool):
            _check_int(item, path)


#: A value's JSON text as a tool receives it: UTF-8 characters as they are, no NaN or infinity.
encode = json_encoder(ensure_ascii=False, allow_nan=False)


def checked_text(value: Any) -> tuple[str, int] | None:
    """:func:`check_value` and :data:`encode` in one pass: the value's JSON text and its size in UTF-8 bytes.

    The C encoder writes the text first, and the walk of :func:`check_value` runs
    only when the text could hide what it refuses: more than ``MAX_DEPTH``
    brackets, more than ``MAX_NUMBER_CHARS`` characters (room for a number that
    long), a lone surrogate (the text is not valid UTF-8), or a value the
    encoder refused. A short value that passes costs one C encoding.

    Returns:
        ``(text, utf8_bytes)``, or None for a value that passes the rules but is
        not JSON (a set, NaN, a cycle): the caller refuses it in its own words.

    Raises:
        JsonRejected: the value breaks a rule (exactly when :func:`check_value` raises).

    >>> checked_text({"a": "é"})
    ('{"a": "é"}', 11)
    >>> checked_text({1, 2}) is None
    True
    """
    try:
        text = encode(value)
    except (TypeError, ValueError, RecursionError):
        check_value(value)
        return None
    if len(text) > MAX_NUMBER_CHARS or text.count("[") + text.count("{") > MAX_DEPTH:
        check_value(value)
    if text.isascii():
        return text, len(text)
    try:
        return text, len(text.encode("utf-8"))
    except UnicodeEncodeError:
        check_value(value)  # a lone surrogate is in one of its strings: this raises
        return None


def _scanned(decoder: json.JSONDecoder, text: str) -> Any:
    """``decoder.decode(text)``: a text with no whitespace around its value goes to the C scanner straight."""
    if text and text[0] not in _SPACE and text[-1] not in _SPACE:
        try:
            value, end = decoder.scan_once(text, 0)  # type: ignore[attr-defined]
        except StopIteration:
            pass  # not JSON: ``decode`` says where, in its words
        else:
            if end == len(text):
                return value
    return decoder.decode(text)


#: What ``json`` skips as whitespace around a value.
_SPACE = frozenset(" \t\n\r")


def escape_surrogates(text: str) -> str:
    """``text`` with each lone surrogate written as its ``\\udXXX`` escape (otherwise unchanged).

    >>> escape_surrogates("ok")
    'ok'
    >>> escape_surrogates("a\\ud800b")
    'a\\\\ud800b'
    """
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _decode(data: bytes) -> str:
    try:
        return data.decode(json.detect_encoding(data))
    except UnicodeDecodeError as exc:
        raise JsonRejected(f"is not JSON: its bytes are not valid {exc.encoding} (at byte {exc.start})") from exc


def _pointer(path: tuple[Any, ...]) -> str:
    text = "/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in path)
    return escape_surrogates(text if len(text) <= 200 else text[:197] + "...")


def _too_deep(path: tuple[Any, ...]) -> JsonRejected:
    where = f" (at {_pointer(path)})" if path else ""
    return JsonRejected(f"is nested deeper than {MAX_DEPTH} levels{where}", {"max_depth": MAX_DEPTH})


def _enter(path: tuple[Any, ...]) -> None:
    if len(path) >= MAX_DEPTH:
        raise _too_deep(path)


def _check_str(text: str, path: tuple[Any, ...]) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        lone = f"U+{ord(text[exc.start]):04X}"
        raise JsonRejected(
            f"holds a lone surrogate ({lone}) in a string at {_pointer(path)}: strings must be valid Unicode",
            {"path": _pointer(path)},
        ) from exc


def _number_too_long(chars: int | None, path: tuple[Any, ...]) -> JsonRejected:
    where = f" at {_pointer(path)}" if path else ""
    size = f"{chars} characters" if chars is not None else f"more than {MAX_NUMBER_CHARS} digits"
    return JsonRejected(
        f"holds a number of {size}{where}, over the {MAX_NUMBER_CHARS}-character limit",
        {"max_number_chars": MAX_NUMBER_CHARS, **({"path": _pointer(path)} if path else {})},
    )


def _check_int(number: int, path: tuple[Any, ...]) -> None:
    bits = number.bit_length()
    if bits < _SURE_BITS:
        return
    if bits >= _OVER_BITS:
        raise _number_too_long(None, path)  # too long to count: str() would refuse it
    digits = len(str(abs(number)))
    if digits > MAX_NUMBER_CHARS:
        raise _number_too_long(digits, path)


def _parse_int(text: str) -> int:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long(len(text), ())
    return int(text)


def _parse_float(text: str) -> float:
    if len(text) > MAX_NUMBER_CHARS:
        raise _number_too_long(len(text), ())
    number = float(text)
    if math.isinf(number):
        raise JsonRejected(f"holds the number {text[:40]}, out of the range of a double")
    return number


def _parse_constant(name: str) -> float:
    raise JsonRejected(f"is not JSON: {name} is not a JSON value")


# One decoder, built once: ``json.loads`` with hooks would build one per call.
_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_parse_constant)
_SHORT_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_parse_constant)
