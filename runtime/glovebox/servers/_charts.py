"""The health page's small charts: calls per minute by outcome, and p50/p99 per minute, as SVG.

Read from the audit log (every process's calls, not only this server's), over
the last :data:`WINDOW_MIN` minutes and at most :data:`MAX_ROWS` records. The
SVG is drawn here, on the server, with presentation attributes only (no
``style``, no script), so the console's CSP holds; every text in it is escaped.
Each chart comes with the numbers it draws, as a table, for screen readers.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from markupsafe import Markup, escape

__all__ = ["MAX_ROWS", "WINDOW_MIN", "Minutes", "latency_svg", "minutes", "outcome_totals", "outcomes_svg", "shade"]

#: Minutes the charts cover.
WINDOW_MIN = 30
#: Records read for them at most (the newest).
MAX_ROWS = 200_000
_WIDTH, _HEIGHT, _PAD = 600, 140, 28
_GOOD, _BAD, _P50, _P99 = "#1e7a3a", "#a4262c", "#1f5fbf", "#b36b00"
_BAD_SHADES = ("#a4262c", "#c2571a", "#7a3aa0", "#5b6475", "#b3127e", "#8a6d00")


@dataclass
class Minutes:
    """Per-minute counts by outcome and latency percentiles, oldest minute first."""

    labels: list[str]
    counts: dict[str, list[int]] = field(default_factory=dict)
    p50_ms: list[float | None] = field(default_factory=list)
    p99_ms: list[float | None] = field(default_factory=list)
    capped: bool = False

    @property
    def total(self) -> int:
        return sum(sum(row) for row in self.counts.values())


def _percentile(sorted_ms: list[float], fraction: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(fraction * len(sorted_ms)))]


def minutes(rows: list[tuple[str, str, str, float]], now: datetime, *, capped: bool = False) -> Minutes:
    """Bucket ``(time, tool, outcome, duration_ms)`` records into the :data:`WINDOW_MIN` minutes before ``now``."""
    start = now.astimezone(UTC).replace(second=0, microsecond=0) - timedelta(minutes=WINDOW_MIN - 1)
    keys = [(start + timedelta(minutes=i)).isoformat()[:16] for i in range(WINDOW_MIN)]
    index = {key: i for i, key in enumerate(keys)}
    counts: dict[str, list[int]] = {}
    durations: list[list[float]] = [[] for _ in keys]
    for time, _tool, outcome, duration_ms in rows:
        slot = index.get(time[:16])
        if slot is None:
            continue
        counts.setdefault(outcome, [0] * len(keys))[slot] += 1
        durations[slot].append(duration_ms)
    p50: list[float | None] = []
    p99: list[float | None] = []
    for values in durations:
        values.sort()
        p50.append(_percentile(values, 0.50) if values else None)
        p99.append(_percentile(values, 0.99) if values else None)
    ordered = dict(sorted(counts.items(), key=lambda item: (item[0] != "ok", item[0])))
    return Minutes([key[11:] for key in keys], ordered, p50, p99, capped)


def _frame(title: str, body: list[str], top: float, unit: str, labels: list[str]) -> Markup:
    left, bottom = _PAD + 12, _HEIGHT - _PAD
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" '
        f'role="img" aria-label="{escape(title)}"><title>{escape(title)}</title>',
        f'<line x1="{left}" y1="{bottom}" x2="{_WIDTH - 4}" y2="{bottom}" stroke="#d9dde5"/>',
        # The top's label sits above the plot, from its left edge: no width of number or unit can clip it.
        f'<line x1="{left}" y1="{_PAD}" x2="{_WIDTH - 4}" y2="{_PAD}" stroke="#eef1f6"/>',
        f'<text x="{left}" y="{_PAD - 8}" font-size="13" fill="#5b6475" class="top">'
        f"{escape(_number(top))} {escape(unit)}</text>",
        f'<text x="{left - 4}" y="{bottom}" text-anchor="end" font-size="13" fill="#5b6475">0</text>',
        f'<text x="{left}" y="{_HEIGHT - 8}" font-size="13" fill="#5b6475">{escape(labels[0])}</text>',
        f'<text x="{_WIDTH - 4}" y="{_HEIGHT - 8}" text-anchor="end" font-size="13" fill="#5b6475">'
        f"{escape(labels[-1])} UTC</text>",
        *body,
        "</svg>",
    ]
    return Markup("".join(parts))


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def _x(slot: int, count: int) -> tuple[float, float]:
    left = _PAD + 12
    step = (_WIDTH - 4 - left) / count
    return left + slot * step, step


def _y(value: float, top: float) -> float:
    return (_HEIGHT - _PAD) - (value / top) * (_HEIGHT - 2 * _PAD) if top > 0 else _HEIGHT - _PAD


def shade(outcome: str, order: list[str]) -> str:
    """The colour of an outcome in both the chart and its legend."""
    if outcome == "ok":
        return _GOOD
    bad = [name for name in order if name != "ok"]
    return _BAD_SHADES[bad.index(outcome) % len(_BAD_SHADES)] if outcome in bad else _BAD


def outcomes_svg(data: Minutes) -> Markup:
    """Stacked bars: calls per minute, one colour per outcome."""
    per_minute = [sum(row[i] for row in data.counts.values()) for i in range(len(data.labels))]
    top = float(max(per_minute, default=0) or 1)
    order = list(data.counts)
    body: list[str] = []
    for slot in range(len(data.labels)):
        x, step = _x(slot, len(data.labels))
        level = 0
        for outcome, row in data.counts.items():
            if row[slot]:
                y_top, y_bottom = _y(level + row[slot], top), _y(level, top)
                body.append(
                    f'<rect x="{x + 1:.1f}" y="{y_top:.1f}" width="{max(step - 2, 1):.1f}" '
                    f'height="{y_bottom - y_top:.1f}" fill="{shade(outcome, order)}">'
                    f"<title>{escape(data.labels[slot])} {escape(outcome)}: {row[slot]}</title></rect>"
                )
                level += row[slot]
    return _frame(f"Calls per minute by outcome, last {WINDOW_MIN} minutes", body, top, "calls", data.labels)


def latency_svg(data: Minutes) -> Markup:
    """Two lines: p50 and p99 of the calls' durations, per minute (gaps where no call ran)."""
    top = max((v for v in data.p99_ms if v is not None), default=1.0) or 1.0
    body: list[str] = []
    for values, colour in ((data.p50_ms, _P50), (data.p99_ms, _P99)):
        points = []
        for slot, value in enumerate(values):
            if value is not None:
                x, step = _x(slot, len(values))
                points.append(f"{x + step / 2:.1f},{_y(value, top):.1f}")
        if points:
            body.append(f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="2"/>')
            body.extend(
                f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2.5" fill="{colour}"/>' for p in points
            )
    return _frame(f"Call duration p50 and p99 per minute, last {WINDOW_MIN} minutes", body, top, "ms", data.labels)


def outcome_totals(data: Minutes) -> Counter[str]:
    """Calls in the window by outcome."""
    return Counter({outcome: sum(row) for outcome, row in data.counts.items()})
