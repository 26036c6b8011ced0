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

import logging
import os
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from .._grants import SecretRule
from ._rules import host_matches

__all__ = ["REDACTED", "Scrubber", "Secret", "guard_logs", "load_secrets"]

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


def _read(rule: SecretRule) -> str | None:
    if rule.provider == "env":
        return os.environ.get(rule.source) or None
    try:
        return Path(rule.source).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def load_secrets(rules: Sequence[SecretRule]) -> list[Secret]:
    """Read every rule's value; a missing or unusable one is skipped and logged by name."""
    secrets = []
    for rule in rules:
        value = _read(rule)
        if value is None or any(c in value for c in "\r\n\0"):
            logger.warning("secret %r (%s provider) has no usable value; not sent", rule.name, rule.provider)
            continue
        secrets.append(Secret(rule, value))
    return secrets


class Scrubber:
    """Replaces every secret value (raw, header-formatted, URL-encoded) with ``[REDACTED]``."""

    def __init__(self, secrets: Sequence[Secret]) -> None:
        needles: set[str] = set()
        for secret in secrets:
            needles.update({secret.header_value, secret.value, quote(secret.value, safe="")})
        self._text = sorted(needles, key=len, reverse=True)
        self._bytes = [needle.encode("utf-8") for needle in self._text]

    def __bool__(self) -> bool:
        return bool(self._text)

    def bytes(self, data: bytes) -> bytes:
        """``data`` with every secret replaced."""
        for needle in self._bytes:
            if needle in data:
                data = data.replace(needle, REDACTED.encode())
        return data

    def text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        for needle in self._text:
            if needle in text:
                text = text.replace(needle, REDACTED)
        return text


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
