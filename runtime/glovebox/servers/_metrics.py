"""Call metrics in the Prometheus text format, with no client library.

Counters and the histogram are guarded by one lock; rendering takes a
consistent snapshot. Series:

- ``glovebox_calls_total{tool, outcome}``: calls by tool and outcome
  (``ok`` or the error code).
- ``glovebox_call_duration_seconds``: a latency histogram.
- ``glovebox_fuel_used_total{tool}``: fuel burnt.
- ``glovebox_live_instances``: sandboxes running right now.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["BUCKETS_S", "Metrics"]

#: Upper bounds of the latency histogram, in seconds.
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    """Thread-safe counters of calls, rendered as Prometheus text.

    >>> m = Metrics()
    >>> m.observe({"ok": True, "meta": {"tool": "calc", "duration_ms": 2.0, "fuel_used": 10}})
    >>> 'glovebox_calls_total{tool="calc",outcome="ok"} 1' in m.render()
    True
    """

    def __init__(self, live_instances: Callable[[], int] | None = None) -> None:
        self._lock = threading.Lock()
        self._calls: dict[tuple[str, str], int] = {}
        self._fuel: dict[str, int] = {}
        self._buckets = [0] * len(BUCKETS_S)
        self._count = 0
        self._sum_s = 0.0
        self._live = live_instances

    def observe(self, envelope: dict[str, Any]) -> None:
        """Count one call from its envelope."""
        meta = envelope.get("meta", {})
        tool = str(meta.get("tool") or "")
        outcome = "ok" if envelope.get("ok") else str(envelope.get("error", {}).get("code", "internal_error"))
        seconds = float(meta.get("duration_ms") or 0.0) / 1000
        fuel = int(meta.get("fuel_used") or 0)
        with self._lock:
            self._calls[(tool, outcome)] = self._calls.get((tool, outcome), 0) + 1
            self._fuel[tool] = self._fuel.get(tool, 0) + fuel
            self._count += 1
            self._sum_s += seconds
            for i, bound in enumerate(BUCKETS_S):
                if seconds <= bound:
                    self._buckets[i] += 1

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        with self._lock:
            calls, fuel = dict(self._calls), dict(self._fuel)
            buckets, count, total = list(self._buckets), self._count, self._sum_s
        lines = ["# HELP glovebox_calls_total Tool calls by tool and outcome.", "# TYPE glovebox_calls_total counter"]
        for (tool, outcome), n in sorted(calls.items()):
            lines.append(f'glovebox_calls_total{{tool="{_label(tool)}",outcome="{_label(outcome)}"}} {n}')
        lines += [
            "# HELP glovebox_call_duration_seconds Time per call, admission to envelope.",
            "# TYPE glovebox_call_duration_seconds histogram",
        ]
        for bound, n in zip(BUCKETS_S, buckets, strict=True):
            lines.append(f'glovebox_call_duration_seconds_bucket{{le="{bound}"}} {n}')
        lines.append(f'glovebox_call_duration_seconds_bucket{{le="+Inf"}} {count}')
        lines.append(f"glovebox_call_duration_seconds_sum {total:.6f}")
        lines.append(f"glovebox_call_duration_seconds_count {count}")
        lines += ["# HELP glovebox_fuel_used_total Fuel consumed by tool.", "# TYPE glovebox_fuel_used_total counter"]
        for tool, n in sorted(fuel.items()):
            lines.append(f'glovebox_fuel_used_total{{tool="{_label(tool)}"}} {n}')
        if self._live is not None:
            lines += [
                "# HELP glovebox_live_instances Sandbox instances alive right now.",
                "# TYPE glovebox_live_instances gauge",
                f"glovebox_live_instances {self._live()}",
            ]
        return "\n".join(lines) + "\n"
