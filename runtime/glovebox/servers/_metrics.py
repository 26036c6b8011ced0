"""Request and call metrics in the Prometheus text format, with no client library.

Counters and the histogram are guarded by one lock; rendering takes a
consistent snapshot. Every label takes its values from a bounded set, so no
caller can grow the exposition: routes are templates (``/v1/tools/{name}``,
or ``(unmatched)``) and a tool name that is not registered is ``(unknown)``.
Series:

- ``glovebox_http_requests_total{route, status}``: every answer of the HTTP API,
  401, 404 and 413 included.
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

__all__ = ["BUCKETS_S", "UNKNOWN_TOOL", "UNMATCHED_ROUTE", "Metrics", "count_requests"]

#: Upper bounds of the latency histogram, in seconds.
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The ``tool`` label of a call naming no registered tool (``tool_not_found``).
UNKNOWN_TOOL = "(unknown)"
#: The ``route`` label of a request that matches no route.
UNMATCHED_ROUTE = "(unmatched)"

ASGIApp = Callable[..., Any]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _tool_label(envelope: dict[str, Any]) -> str:
    meta = envelope.get("meta", {})
    if envelope.get("error", {}).get("code") == "tool_not_found" or meta.get("digest") is None:
        return UNKNOWN_TOOL  # the name is the caller's, not one of the registry's
    return str(meta.get("tool") or UNKNOWN_TOOL)


class Metrics:
    """Thread-safe counters of requests and calls, rendered as Prometheus text.

    >>> m = Metrics()
    >>> m.observe({"ok": True, "meta": {"tool": "calc", "digest": "sha256:..", "duration_ms": 2.0, "fuel_used": 10}})
    >>> 'glovebox_calls_total{tool="calc",outcome="ok"} 1' in m.render()
    True
    >>> m.observe({"ok": False, "error": {"code": "tool_not_found"}, "meta": {"tool": "whatever-a-caller-sent"}})
    >>> 'glovebox_calls_total{tool="(unknown)",outcome="tool_not_found"} 1' in m.render()
    True
    """

    def __init__(self, live_instances: Callable[[], int] | None = None) -> None:
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, int], int] = {}
        self._calls: dict[tuple[str, str], int] = {}
        self._fuel: dict[str, int] = {}
        self._buckets = [0] * len(BUCKETS_S)
        self._count = 0
        self._sum_s = 0.0
        self._live = live_instances

    def observe_request(self, route: str, status: int) -> None:
        """Count one HTTP answer by route template and status code."""
        with self._lock:
            self._requests[(route, status)] = self._requests.get((route, status), 0) + 1

    def observe(self, envelope: dict[str, Any]) -> None:
        """Count one call from its envelope."""
        meta = envelope.get("meta", {})
        tool = _tool_label(envelope)
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
            requests, calls, fuel = dict(self._requests), dict(self._calls), dict(self._fuel)
            buckets, count, total = list(self._buckets), self._count, self._sum_s
        lines = [
            "# HELP glovebox_http_requests_total HTTP answers by route template and status code.",
            "# TYPE glovebox_http_requests_total counter",
        ]
        for (route, status), n in sorted(requests.items()):
            lines.append(f'glovebox_http_requests_total{{route="{_label(route)}",status="{status}"}} {n}')
        lines += ["# HELP glovebox_calls_total Tool calls by tool and outcome.", "# TYPE glovebox_calls_total counter"]
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


def count_requests(app: ASGIApp, metrics: Metrics) -> ASGIApp:
    """ASGI middleware counting every HTTP answer of ``app`` in ``metrics``.

    The route label is the template of the route the router chose (Starlette
    leaves it in ``scope["route"]``), so raw paths never become labels. An
    exception that escapes before an answer started counts as a 500, the
    answer the outer error handler sends.
    """

    async def middleware(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        status: list[int] = []

        async def send_counted(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await app(scope, receive, send_counted)
        finally:
            route = scope.get("route")
            metrics.observe_request(str(getattr(route, "path", UNMATCHED_ROUTE)), status[0] if status else 500)

    return middleware
