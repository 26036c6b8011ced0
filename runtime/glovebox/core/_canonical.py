"""The one canonical JSON encoder and the one digest helper.

Their bytes are wire formats: what a signature covers (a manifest's text), a
remote tool's descriptor (whose SHA-256 is its digest), an approval's input
digest and every link of the audit hash chain. Version 1 of each is frozen:
a home written by an earlier glovebox must still verify, so every caller
names the variant it has always used:

==========================  ===========  ==========
wire format                 ``ascii``    ``allow_nan``
==========================  ===========  ==========
manifest text (signatures)  True         True
input digest (approvals)    False        False
audit rows, descriptors     False        True
==========================  ===========  ==========

Canonical means sorted keys and no spaces (``","`` and ``":"``).

>>> canonical_json({"b": 1, "a": "é"})
'{"a":"é","b":1}'
>>> canonical_json({"a": "é"}, ascii=True)
'{"a":"\\\\u00e9"}'
>>> sha256_digest(b"")
'sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855'
"""

from __future__ import annotations

import hashlib
import json
import json.encoder
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["canonical_bytes", "canonical_json", "file_digest", "json_encoder", "sha256_digest", "sha256_hex"]


def json_encoder(
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
    ensure_ascii: bool = True,
    allow_nan: bool = True,
    check_circular: bool = True,
) -> Callable[[Any], str]:
    r"""``json.JSONEncoder(...).encode`` for these options, the same text, with less Python per call.

    ``check_circular=False`` (for values the host built itself, such as an audit
    record) builds the C encoder once, with no circular-reference table: a
    cycle then raises ``RecursionError`` instead of ``ValueError``, and a call
    costs about half as much.

    ``JSONEncoder.encode`` builds a closure and looks its options up on every
    call before it hands the value to the C encoder; this builds the C encoder
    (with a fresh circular-reference table each call, as ``encode`` does)
    straight away. Without the C accelerator it is ``JSONEncoder.encode``.

    >>> json_encoder(sort_keys=True, separators=(",", ":"))({"b": [1.5, None], "a": "é"})
    '{"a":"\\u00e9","b":[1.5,null]}'
    """
    plain = json.JSONEncoder(sort_keys=sort_keys, separators=separators, ensure_ascii=ensure_ascii, allow_nan=allow_nan)
    make = getattr(json.encoder, "c_make_encoder", None)
    strings = getattr(json.encoder, "c_encode_basestring_ascii" if ensure_ascii else "c_encode_basestring", None)
    if make is None or strings is None:
        return plain.encode
    default = plain.default
    item_separator, key_separator = separators
    if not check_circular:
        once = make(None, default, strings, None, key_separator, item_separator, sort_keys, False, allow_nan)

        def encode_once(value: Any) -> str:
            if isinstance(value, str):
                return str(strings(value))
            return "".join(once(value, 0))

        return encode_once

    def encode(value: Any) -> str:
        if isinstance(value, str):
            return str(strings(value))
        chunks = make({}, default, strings, None, key_separator, item_separator, sort_keys, False, allow_nan)(value, 0)
        return "".join(chunks)

    return encode


# Built once: ``json.dumps`` with options builds an encoder on every call.
_ENCODERS = {
    (ascii, allow_nan): json_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=ascii, allow_nan=allow_nan)
    for ascii in (False, True)
    for allow_nan in (False, True)
}
_CHUNK = 1 << 20


def canonical_json(value: Any, *, ascii: bool = False, allow_nan: bool = True) -> str:
    """Sorted keys, no spaces; ``ascii`` escapes non-ASCII characters.

    Raises:
        TypeError: ``value`` holds something that is not JSON.
        ValueError: ``allow_nan`` is False and ``value`` holds NaN or an infinity.
    """
    return _ENCODERS[ascii, allow_nan](value)


def canonical_bytes(value: Any, *, ascii: bool = False, allow_nan: bool = True) -> bytes:
    """:func:`canonical_json` as UTF-8."""
    return _ENCODERS[ascii, allow_nan](value).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    """The SHA-256 of ``data`` (text as UTF-8), as 64 hex digits."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def sha256_digest(data: bytes | str) -> str:
    """``sha256:<hex>``: how glovebox names artifacts, descriptors, inputs and policies."""
    return "sha256:" + sha256_hex(data)


def file_digest(path: Path) -> str:
    """``sha256:<hex>`` of a file's bytes, read in chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()
