"""Secrets the host adds to outgoing requests, and the scrubbing that keeps them from the guest.

A :class:`glovebox.SecretRule` names a provider (``env``: an environment
variable of the host process; ``file``: a file whose stripped text is the
value), the host pattern whose requests receive it, and the header it is sent
in. Values are read when a call starts and live only in the call's HTTP
capability: they are never logged, never put in meta, and any response the
guest receives has them replaced by ``[REDACTED]``.

>>> scrub = Scrubber([Secret(SecretRule(name="t", source="X", host="a.example.com"), "s3cret")])
>>> scrub.bytes(b"token=s3cret; auth=Bearer s3cret")
b'token=[REDACTED]; auth=[REDACTED]'
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..model._grants import SecretRule
from ..model._rules import host_matches

__all__ = ["REDACTED", "Scrubber", "Secret", "guard_logs", "load_secrets", "read_secret"]

REDACTED = "[REDACTED]"
logger = logging.getLogger("glovebox.secrets")


@dataclass(frozen=True)
class Secret:
    """A secret value and the rule saying where it goes (``repr`` hides the value)."""

    rule: SecretRule
    value: str = field(repr=False)

    @property
    def header_value(self) -> str:
        """The header value sent upstream, e.g. ``Bearer <value>``."""
        return self.rule.format.replace("{value}", self.value)

    def applies_to(self, scheme: str, host: str) -> bool:
        """Whether a request to ``scheme://host`` receives this secret."""
        return scheme in self.rule.schemes and host_matches(self.rule.host, host)


def read_secret(provider: str, source: str, home: Path | None = None) -> str | None:
    """The value of one secret, or None (logged by reference and reason, never the value).

    ``source`` is a reference (``keyring://svc/user``, ``exec://...``, see
    :mod:`._providers`) or, in the older form, what ``provider`` reads: an
    environment variable (``env``) or a file path (``file``).
    """
    from ._providers import SecretUnavailable, get_secret

    try:
        value = get_secret(source, provider, home=home).decode("utf-8")
    except SecretUnavailable as exc:
        logger.warning("secret unavailable: %s", exc)
        return None
    except UnicodeDecodeError:
        logger.warning("secret %s://%s is not UTF-8 text", provider, "..." if "://" in source else source)
        return None
    return value or None


def _read(rule: SecretRule, principal: str | None, home: Path | None) -> str | None:
    source = rule.source
    if "{principal}" in source and principal is not None:
        source = source.replace("{principal}", principal)  # connection://github/{principal}: the caller's account
    return read_secret(rule.provider, source, home)


def load_secrets(rules: Sequence[SecretRule], principal: str | None = None, home: Path | None = None) -> list[Secret]:
    """Read every rule's value; a missing or unusable one is skipped and logged by name.

    ``{principal}`` in a rule's source is the calling ``principal`` (without one, it is left and names nothing);
    ``home`` is the call's home, where a ``connection://`` token is read (None: ``GLOVEBOX_HOME``).
    """
    secrets = []
    for rule in rules:
        value = _read(rule, principal, home)
        if value is None or any(c in value for c in "\r\n\0"):
            logger.warning("secret %r (%s provider) has no usable value; not sent", rule.name, rule.provider)
            continue
        secrets.append(Secret(rule, value))
    return secrets


class Scrubber:
    """Replaces every secret, in the encodings a server may echo it in, with ``[REDACTED]``.

    For each secret: the raw and header-formatted values; their hex (lower and
    upper case); their base64 (standard and URL-safe alphabets, with and
    without padding), and the part of a longer base64 text that encodes the
    value at each of the three byte alignments (at most one character either
    side, which carries only a few bits of the secret, is left); and the value
    with any mix of its characters percent-escaped (either hex case) or
    JSON-escaped (``\\uXXXX`` in either case, ``\\/``, ``\\"``, ``\\\\``).
    """

    def __init__(self, secrets: Sequence[Secret]) -> None:
        needles: set[str] = set()
        for secret in secrets:
            needles.update(_forms(secret.header_value) | _forms(secret.value))
        needles.discard("")
        self._text = sorted(needles, key=len, reverse=True)
        self._bytes = [needle.encode("utf-8") for needle in self._text]
        escaped = [_escaped_pattern(secret.value) for secret in secrets]
        self._text_re = re.compile("|".join(escaped)) if escaped else None
        self._bytes_re = re.compile("|".join(escaped).encode("utf-8")) if escaped else None

    def __bool__(self) -> bool:
        return bool(self._text)

    def bytes(self, data: bytes) -> bytes:
        """``data`` with every secret replaced."""
        for needle in self._bytes:
            if needle in data:
                data = data.replace(needle, _REDACTED_BYTES)
        if self._bytes_re is not None and (b"%" in data or b"\\" in data):
            data = self._bytes_re.sub(_REDACTED_BYTES, data)
        return data

    def text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for needle in self._text:
            if needle in text:
                text = text.replace(needle, REDACTED)
        if self._text_re is not None and ("%" in text or "\\" in text):
            text = self._text_re.sub(REDACTED, text)
        return text

    def data(self, value: Any) -> Any:
        """A copy of the JSON value ``value`` with every string in it, keys too, scrubbed.

        Walked with an explicit stack, so a value nested however deep cannot exhaust the interpreter's.

        >>> scrub = Scrubber([Secret(SecretRule(name="t", source="X", host="a.example.com"), "s3cret")])
        >>> scrub.data({"s3cret": ["a s3cret", 1, None]})
        {'[REDACTED]': ['a [REDACTED]', 1, None]}
        """
        if not self:
            return value
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(value, root, 0)]
        while stack:
            node, parent, key = stack.pop()
            if isinstance(node, str):
                parent[key] = self.text(node)
            elif isinstance(node, dict):
                names = [self.text(name) if isinstance(name, str) else name for name in node]
                copy: dict[Any, Any] = dict.fromkeys(names)
                parent[key] = copy
                stack.extend((item, copy, name) for name, item in zip(names, node.values(), strict=True))
            elif isinstance(node, list):
                items: list[Any] = [None] * len(node)
                parent[key] = items
                stack.extend((item, items, index) for index, item in enumerate(node))
            else:
                parent[key] = node
        return root[0]


_REDACTED_BYTES = REDACTED.encode()
#: Shorter base64 fragments of a shifted secret are not replaced (they would match too much).
_MIN_FRAGMENT = 8


def _forms(value: str) -> set[str]:
    """The literal forms of ``value``: raw, percent-encoded, hex and base64."""
    raw = value.encode("utf-8")
    forms = {value, quote(value, safe=""), raw.hex(), raw.hex().upper()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode("ascii")
        forms.update({whole, whole.rstrip("=")})
        for shift in (0, 1, 2):
            # Characters of base64(k filler bytes + value) that only the value's bits decide.
            text = encode(b"\0" * shift + raw).decode("ascii").rstrip("=")
            first, last = -(-8 * shift // 6), 8 * (shift + len(raw)) // 6
            if last - first >= _MIN_FRAGMENT:
                forms.add(text[first:last])
    return forms


def _escaped_pattern(value: str) -> str:
    """A regex matching ``value`` with any of its characters percent- or JSON-escaped."""
    return "".join(_char_pattern(char) for char in value)


def _char_pattern(char: str) -> str:
    def either_case(hex_digits: str) -> str:
        return "".join(f"[{d.lower()}{d.upper()}]" if d.isalpha() else d for d in hex_digits)

    options = [re.escape(char)]
    options.append("".join("%" + either_case(f"{b:02x}") for b in char.encode("utf-8")))
    units = char.encode("utf-16-be")
    options.append("".join(r"\\u" + either_case(units[i : i + 2].hex()) for i in range(0, len(units), 2)))
    if char in '"\\/':
        options.append(re.escape("\\" + char))
    return "(?:" + "|".join(options) + ")"


#: Scrubbers of the calls running now; the log filter applies all of them.
_active: weakref.WeakSet[Scrubber] = weakref.WeakSet()
_active_lock = threading.Lock()
#: Loggers of the HTTP stack that may print headers (httpcore traces them at DEBUG).
HTTP_LOGGERS = ("httpx", "httpcore.connection", "httpcore.http11", "httpcore.http2", "httpcore.proxy")


class _LogScrubber(logging.Filter):
    """Redacts the secrets of running calls from the HTTP stack's log records."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _active_lock:
            scrubbers = list(_active)
        if scrubbers:
            message = record.getMessage()
            for scrubber in scrubbers:
                message = scrubber.text(message)
            record.msg, record.args = message, None
        return True


_FILTER = _LogScrubber()


def guard_logs(scrubber: Scrubber, active: bool) -> None:
    """Start (or stop) redacting ``scrubber``'s secrets from the HTTP stack's logs."""
    if not scrubber:
        return
    with _active_lock:
        if active:
            _active.add(scrubber)
        else:
            _active.discard(scrubber)
    for name in HTTP_LOGGERS:
        log = logging.getLogger(name)
        if _FILTER not in log.filters:
            log.addFilter(_FILTER)
