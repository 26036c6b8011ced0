"""Which audit records a reader wants: ``glovebox audit tail|export --tool --principal --outcome --since --call-id``.

A :class:`RecordFilter` is a conjunction: a record is kept when it meets every
criterion given (none given keeps everything). ``since`` is ISO 8601 (a date, or
a date and time; without a zone it is UTC) or a span back from now (``30s``,
``15m``, ``2h``, ``7d``), parsed by :func:`parse_since`.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

__all__ = ["RecordFilter", "newest", "parse_since"]

_SPAN = re.compile(r"^(\d+)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """The moment ``text`` names: ISO 8601 (UTC unless it says otherwise) or a span back from ``now``.

    >>> parse_since("2026-12-01T10:00:00Z").isoformat()
    '2026-12-01T10:00:00+00:00'
    >>> parse_since("2h", now=datetime(2026, 12, 1, 12, tzinfo=UTC)).isoformat()
    '2026-12-01T10:00:00+00:00'

    Raises:
        ValueError: ``text`` is neither (the message says what is accepted).
    """
    span = _SPAN.match(text.strip())
    if span:
        amount, unit = int(span.group(1)), _UNITS[span.group(2)]
        return (now or datetime.now(UTC)) - timedelta(**{unit: amount})
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"--since {text!r} is neither ISO 8601 (2026-12-01, 2026-12-01T10:00:00Z) nor a span (30s, 15m, 2h, 7d)"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class RecordFilter:
    """What a record must be to be kept; ``None`` leaves a criterion out.

    ``tool`` matches a record's ``name@version`` by its name or exactly;
    ``outcome`` is ``ok`` or an error code.
    """

    tool: str | None = None
    principal: str | None = None
    outcome: str | None = None
    since: datetime | None = None
    call_id: str | None = None

    def __bool__(self) -> bool:
        return any(value is not None for value in vars(self).values())

    def matches(self, record: dict[str, Any]) -> bool:
        """Whether ``record`` meets every criterion given."""
        if self.tool is not None and self.tool not in (record["tool"], str(record["tool"]).split("@", 1)[0]):
            return False
        if self.principal is not None and record["principal"] != self.principal:
            return False
        if self.outcome is not None and record["outcome"] != self.outcome:
            return False
        if self.call_id is not None and record["call_id"] != self.call_id:
            return False
        return self.since is None or _time(record) >= self.since

    def apply(self, records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The records that match, in their order."""
        return (record for record in records if self.matches(record))


def newest(records: Iterable[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """The last ``count`` of ``records``, oldest first (reads them all, keeps ``count``)."""
    return list(deque(records, maxlen=max(count, 0)))


def _time(record: dict[str, Any]) -> datetime:
    try:
        moment = datetime.fromisoformat(str(record["time"]))
    except ValueError:
        return datetime.min.replace(tzinfo=UTC)  # a time changed underneath into nonsense: never "since"
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
