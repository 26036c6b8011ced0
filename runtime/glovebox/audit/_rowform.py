"""How an audit row is stored and hashed: its fields, its bounds, its journal line, its chain hash.

A record becomes a row in two steps. The writer (``_writer``) journals it as
:func:`line` gives it: its plain JSON, cheap to make inside the call. The fold
(``_fold``) reads the line back (:func:`from_line`) and prepares the row: text
fields bounded (:data:`MAX_TEXT_CHARS`, :data:`MAX_NAME_CHARS`; a cut JSON field
replaced by ``{"truncated_chars": N, "head": "..."}`` and named in the row's
``truncated`` column), lone surrogates escaped, and the canonical JSON its hash
covers cut around ``seq`` (:class:`~glovebox.audit._chain.Pending`), so that
chaining it costs one hash. :func:`row_hash` is the same hash from a stored row,
for verify. The optional columns (``truncated``, ``attempt``, ``first_call_id``)
are hashed only when set, so rows without them, old or new, hash as they always did.
"""

from __future__ import annotations

import json
import operator
import re
from datetime import UTC, datetime
from typing import Any

from ..core._canonical import canonical_json, json_encoder, sha256_hex
from ..core._jsonlimits import escape_surrogates
from ._chain import Pending

__all__ = [
    "COLUMNS",
    "FIELDS",
    "JSON_FIELDS",
    "MAX_NAME_CHARS",
    "MAX_TEXT_CHARS",
    "OPTIONAL",
    "RAW_LINE_CHARS",
    "REDACTED",
    "REQUIRED",
    "STORED",
    "bare",
    "body",
    "from_line",
    "line",
    "prepare",
    "record_json",
    "redact",
    "required_values",
    "row_hash",
    "text",
]

FIELDS = (
    "seq",
    "call_id",
    "time",
    "principal",
    "tool",
    "digest",
    "input_digest",
    "decision",
    "outcome",
    "fuel_used",
    "duration_ms",
    "egress",
    "input",
    "output",
)
#: Fields a record must have (not None): the table refuses a row without them.
REQUIRED = ("call_id", "principal", "tool", "outcome", "fuel_used", "duration_ms", "egress")
#: The values of a record's required fields, in one C call (``KeyError`` when one is absent).
required_values = operator.itemgetter(*REQUIRED)
_SECRET_KEY = re.compile(
    r"pass(word|wd|phrase)?|token|secret|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key|session",
    re.IGNORECASE,
)
REDACTED = "[redacted]"
#: Characters kept of a JSON field (egress, input, output) in one row.
MAX_TEXT_CHARS = 1024 * 1024
#: Characters kept of any other text field (principal, tool, ...).
MAX_NAME_CHARS = 1024
JSON_FIELDS = ("egress", "input", "output")
#: Fields hashed only when set (not None, not empty): columns added after the first release.
OPTIONAL = ("truncated", "attempt", "first_call_id")
#: Every column of the ``audit`` table, in the order a fold inserts them.
COLUMNS = (*FIELDS, "prev_hash", "hash", *OPTIONAL)
#: The fields a record gives (all but ``seq``, which the chain gives).
STORED = tuple(k for k in FIELDS if k != "seq")
# How egress is stored (not a wire format: the chain hashes the canonical form). Built once.
_SORTED = json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode
_CANONICAL = canonical_json
#: The egress of a call that made no request and met no denial, and its JSON (stored as ``_SORTED`` writes it).
_NO_EGRESS: dict[str, Any] = {"denials": []}
_NO_EGRESS_JSON = _SORTED(_NO_EGRESS)
_SEQ_PLACE = b',"seq":0,'
#: Characters of a record's plain JSON past which its journal line is its bounded canonical body.
RAW_LINE_CHARS = 64 * 1024
#: ``json.dumps`` with its defaults (ASCII, NaN as ``NaN``), built once; a record is the host's own
#: value (the call's input was refused at the door if it held a cycle), so no circular-reference table.
_PLAIN = json_encoder(check_circular=False)
#: orjson's encoder and decoder (imported with the first line written or read, not with glovebox), False without it.
_FAST: Any = None
_FAST_LOADS: Any = None
#: Every type json refuses, and every subclass of a JSON type, goes to ``default`` (which refuses it).
_FAST_OPTIONS = 0


def redact(value: Any) -> Any:
    """A copy of a JSON value with the values of secret-looking keys replaced.

    >>> redact({"user": "ann", "Password": "x", "nested": [{"api_key": 1}]})
    {'user': 'ann', 'Password': '[redacted]', 'nested': [{'api_key': '[redacted]'}]}
    """
    if isinstance(value, dict):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    return value


def row_hash(prev_hash: str, record: dict[str, Any]) -> str:
    """The chain hash of one record (every field of FIELDS, in canonical JSON)."""
    fields = {k: record.get(k) for k in FIELDS}
    for name in OPTIONAL:
        if record.get(name):
            fields[name] = record[name]
    return sha256_hex(prev_hash + _CANONICAL(fields))


def body(record: dict[str, Any]) -> bytes:
    """The canonical JSON of ``record``'s row, bounded and escaped, with ``seq`` 0: one journal line's body.

    With its real ``seq`` in place, it is exactly the body :func:`row_hash` hashes.
    """
    return _row_body(record)[1]


def _row_body(record: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The row of ``record`` (bounded, escaped, ``seq`` 0) and its canonical JSON (see :func:`body`)."""
    row = {k: record.get(k) for k in STORED}
    for name in ("attempt", "first_call_id"):
        if record.get(name):
            row[name] = record[name]
    row["time"] = row["time"] or datetime.now(UTC).isoformat(timespec="microseconds")
    for key in JSON_FIELDS:
        value = row[key]
        if value is not None and not isinstance(value, str):
            row[key] = _NO_EGRESS_JSON if value == _NO_EGRESS else _SORTED(value)
    truncated = ",".join(filter(None, [record.get("truncated"), _bound(row)]))
    row["seq"] = 0
    if truncated:
        row["truncated"] = truncated
    return row, _CANONICAL(row).encode("utf-8")


def line(written: int, record: dict[str, Any]) -> bytes:
    """The journal line of ``record``: its JSON as given (``r`` and its plain JSON), bounded,
    escaped and put in canonical form only by the fold, outside the call.

    The plain JSON is orjson's (UTF-8, a tenth of the C encoder's time) when the
    record holds nothing that orjson writes differently from ``json``: a
    non-finite float (orjson writes ``null``) is looked for first, and a value
    orjson refuses (a lone surrogate, an integer past 64 bits, a key that is
    not a string, a subclass of a JSON type, a date or a dataclass) sends the
    record to the C encoder's ASCII JSON, as before. Either reads back (``json.loads``)
    as the same record, so the row and its hash are the same; orjson's line ends
    with a space after the JSON, and the fold reads those with orjson (:func:`from_line`).
    A record whose plain JSON is longer than :data:`RAW_LINE_CHARS` (an input or
    output stored whole) is written as its bounded canonical body instead, so a
    line never holds much more than the row will.
    """
    encode = _FAST if _FAST is not None else _load_fast()
    if encode and _finite(record):
        try:
            fast = encode(record, default=_refuse, option=_FAST_OPTIONS)
        except TypeError:  # orjson's refusal (JSONEncodeError is a TypeError): the C encoder decides
            pass
        else:
            if len(fast) <= RAW_LINE_CHARS:
                return b"%d r%s \n" % (written, fast)  # the space: orjson's, so orjson reads it back
    raw = _PLAIN(record)  # ASCII: a lone surrogate is escaped, never a raw newline
    if len(raw) > RAW_LINE_CHARS:
        return b"%d %s\n" % (written, body(record))
    return b"%d r%s\n" % (written, raw.encode("ascii"))


def _load_fast() -> Any:
    """Import orjson once, for both directions; its encoder (False without it: ``json`` then writes and reads)."""
    global _FAST, _FAST_OPTIONS, _FAST_LOADS
    try:
        import orjson
    except ImportError:  # pragma: no cover - a dependency; the C encoder writes every line then
        _FAST = _FAST_LOADS = False
        return _FAST
    _FAST_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_SUBCLASS
    _FAST, _FAST_LOADS = orjson.dumps, orjson.loads
    return _FAST


def _refuse(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} goes to the C encoder")


def _finite(record: dict[str, Any]) -> bool:
    """Whether no float in ``record`` is NaN or infinite (orjson writes those as ``null``, json as ``NaN``)."""
    stack: list[Any] = [record]
    while stack:
        item = stack.pop()
        for value in item.values() if type(item) is dict else item:
            kind = type(value)
            if kind is float:
                if value - value != 0.0:  # NaN or an infinity
                    return False
            elif (kind is dict or kind is list or kind is tuple) and value:
                stack.append(value)
    return True


def from_line(written: int, content: bytes) -> Pending:
    """The row of one journal line: a plain record (``r...``, see :func:`line`) or a canonical body."""
    if not content.startswith(b"r"):
        return _pending(content)
    record = _read_record(content[1:])
    if not isinstance(record, dict):
        raise ValueError("a journal record is not an object")
    if not record.get("time"):  # the time it was journaled, as ``body`` would have given it then
        seconds, nanos = divmod(written, 1_000_000_000)
        when = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
        record["time"] = when.isoformat(timespec="microseconds")
    return prepare(record)


def _read_record(text: bytes) -> Any:
    """A journal record's JSON, as ``json.loads`` reads it.

    orjson reads it (a fifth of the time) when orjson wrote it, which :func:`line`
    marks with a space after the JSON (any reader of JSON skips it): orjson reads
    its own JSON back as written, where it reads an integer past 64 bits (which it
    never writes) as a float. What the C encoder wrote, or a glovebox before this
    mark, is read by ``json``, and so is what orjson refuses.
    """
    if _FAST_LOADS is None:
        _load_fast()
    if _FAST_LOADS and text.endswith(b" "):
        try:
            return _FAST_LOADS(text)
        except ValueError:  # orjson.JSONDecodeError
            pass
    return json.loads(text)


def _pending(content: bytes) -> Pending:
    """The row of a journal line's body, with its hashed JSON cut around ``seq``.

    ``"seq"`` is never the first or last key, and a string's quotes are
    escaped, so the first ``,"seq":0,`` is the key itself.
    """
    cut = content.index(_SEQ_PLACE)
    row = json.loads(content)
    for name in OPTIONAL:
        row.setdefault(name, None)
    return Pending(row, content[:cut] + b',"seq":', content[cut + len(_SEQ_PLACE) - 1 :])


def prepare(record: dict[str, Any]) -> Pending:
    """The row of ``record``, ready to be chained.

    The row is the one its canonical JSON was made from, not that JSON read back:
    every value in it is a JSON value (a record comes from a journal line or the
    host's own facts), which its canonical JSON gives back equal.
    """
    row, content = _row_body(record)
    cut = content.index(_SEQ_PLACE)
    for name in OPTIONAL:
        row.setdefault(name, None)
    return Pending(row, content[:cut] + b',"seq":', content[cut + len(_SEQ_PLACE) - 1 :])


def bare(row: dict[str, Any]) -> dict[str, Any]:
    """The facts of a row without what can be large (no egress, input or output), numbers SQLite can store."""
    facts = {**{k: row[k] for k in STORED}, "egress": {}, "input": None, "output": None, "truncated": "all"}
    for name in ("attempt", "first_call_id"):
        facts[name] = row.get(name)
    if not (isinstance(facts["fuel_used"], int) and -(2**63) <= facts["fuel_used"] < 2**63):
        facts["fuel_used"] = 0
    return facts


def _bound(row: dict[str, Any]) -> str:
    """Escape lone surrogates (``\\udXXX``, so every row can be hashed and stored as UTF-8) and cut
    oversized text fields, in place; return the names of those cut, comma-separated."""
    cut = []
    for key, value in row.items():
        if not isinstance(value, str):
            continue
        if not value.isascii():
            value = row[key] = escape_surrogates(value)
        if len(value) <= MAX_NAME_CHARS:  # the shorter limit: most fields stop here
            continue
        limit = MAX_TEXT_CHARS if key in JSON_FIELDS else MAX_NAME_CHARS
        if len(value) > limit:
            cut.append(key)
            if key in JSON_FIELDS:
                head = value[: limit // 8]  # JSON-escaped, at most 6 characters each
                row[key] = json.dumps({"truncated_chars": len(value), "head": head}, ensure_ascii=False)
            else:
                row[key] = value[: limit - 16] + "…(truncated)"
    return ",".join(cut)


def text(raw: bytes) -> str | bytes:
    """A TEXT value as read: its string, or its bytes when they are not UTF-8 (no row is written so)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


def record_json(record: dict[str, Any]) -> str:
    """One record as a line of JSON (``audit export``, ``audit tail --json``).

    Every value glovebox writes is text, a number or null; a value changed
    underneath into bytes (a BLOB, or TEXT that is not UTF-8) is shown as
    ``{"blob": "<hex>"}``, which no written value can be.
    """
    return json.dumps(record, ensure_ascii=False, default=_blob)


def _blob(value: object) -> dict[str, str]:
    if isinstance(value, bytes):
        return {"blob": value.hex()}
    raise TypeError(f"{type(value).__name__} is not JSON")
