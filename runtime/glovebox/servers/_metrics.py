"""Request and call metrics, exposed in the Prometheus text format by ``prometheus_client``.

Each :class:`Metrics` keeps its series in a ``CollectorRegistry`` of its own,
never the library's global one, so two servers in one process (or a test
beside an embedding application) count apart. Every label takes its values
from a bounded set, so no caller can grow the exposition: routes are
templates (``/v1/tools/{name}``, or ``(unmatched)``) and a tool name that is
not registered is ``(unknown)``. Series (the counters and the histogram also
have the client's ``_created`` timestamps):

- ``glovebox_http_requests_total{route, status}``: every answer of the HTTP API,
  401, 404 and 413 included.
- ``glovebox_calls_total{tool, outcome}``: calls by tool and outcome
  (``ok`` or the error code).
- ``glovebox_call_duration_seconds``: a latency histogram.
- ``glovebox_fuel_used_total{tool}``: fuel burnt.
- ``glovebox_live_instances``: sandboxes running right now.
- ``glovebox_breaker_state{scope, key}``: each circuit breaker of the home that
  is not closed, or is counting failures: 2 open, 1 half-open, 0 closed; and
  ``glovebox_breaker_failures{scope, key}``, its failures within the window.
  Keys are registered tool names and upstream hosts the policy granted.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric

from ..guards import BreakerState

logger = logging.getLogger("glovebox.servers")

__all__ = ["BUCKETS_S", "UNKNOWN_TOOL", "UNMATCHED_ROUTE", "Metrics", "count_requests"]

#: Upper bounds of the latency histogram, in seconds.
BUCKETS_S = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The ``tool`` label of a call naming no registered tool (``tool_not_found``).
UNKNOWN_TOOL = "(unknown)"
#: The ``route`` label of a request that matches no route.
UNMATCHED_ROUTE = "(unmatched)"

ASGIApp = Callable[..., Any]


def _tool_label(envelope: dict[str, Any]) -> str:
    meta = envelope.get("meta", {})
    if envelope.get("error", {}).get("code") == "tool_not_found" or meta.get("digest") is None:
        return UNKNOWN_TOOL  # the name is the caller's, not one of the registry's
    return str(meta.get("tool") or UNKNOWN_TOOL)


class Metrics:
    """Thread-safe counters of requests and calls in a registry of their own, rendered as Prometheus text.

    Args:
        live_instances: what ``glovebox_live_instances`` reads at each scrape (no such series without it).
        breakers: what the breaker series read at each scrape (none without it).

    >>> m = Metrics()
    >>> m.observe({"ok": True, "meta": {"tool": "calc", "digest": "sha256:..", "duration_ms": 2.0, "fuel_used": 10}})
    >>> 'glovebox_calls_total{outcome="ok",tool="calc"} 1.0' in m.render()
    True
    >>> m.observe({"ok": False, "error": {"code": "tool_not_found"}, "meta": {"tool": "whatever-a-caller-sent"}})
    >>> 'glovebox_calls_total{outcome="tool_not_found",tool="(unknown)"} 1.0' in m.render()
    True
    """

    def __init__(
        self,
        live_instances: Callable[[], int] | None = None,
        breakers: Callable[[], list[BreakerState]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "glovebox_http_requests",
            "HTTP answers by route template and status code.",
            ("route", "status"),
            registry=self.registry,
        )
        self._calls = Counter(
            "glovebox_calls", "Tool calls by tool and outcome.", ("tool", "outcome"), registry=self.registry
        )
        self._duration = Histogram(
            "glovebox_call_duration_seconds",
            "Time per call, admission to envelope.",
            buckets=BUCKETS_S,
            registry=self.registry,
        )
        self._fuel = Counter("glovebox_fuel_used", "Fuel consumed by tool.", ("tool",), registry=self.registry)
        if live_instances is not None:
            live = Gauge("glovebox_live_instances", "Sandbox instances alive right now.", registry=self.registry)
            live.set_function(live_instances)
        if breakers is not None:
            self.registry.register(_Breakers(breakers))

    def observe_request(self, route: str, status: int) -> None:
        """Count one HTTP answer by route template and status code."""
        self._requests.labels(route, str(status)).inc()

    def observe(self, envelope: dict[str, Any]) -> None:
        """Count one call from its envelope."""
        meta = envelope.get("meta", {})
        tool = _tool_label(envelope)
        outcome = "ok" if envelope.get("ok") else str(envelope.get("error", {}).get("code", "internal_error"))
        self._calls.labels(tool, outcome).inc()
        self._fuel.labels(tool).inc(max(0, int(meta.get("fuel_used") or 0)))
        self._duration.observe(max(0.0, float(meta.get("duration_ms") or 0.0) / 1000))

    def render(self) -> str:
        """The Prometheus text exposition (format 0.0.4)."""
        return generate_latest(self.registry).decode("utf-8")


#: ``glovebox_breaker_state`` of each state.
_STATE_VALUE = {"open": 2, "half_open": 1, "closed": 0}


class _Breakers:
    """The breaker series, read from the home at each scrape."""

    def __init__(self, states: Callable[[], list[BreakerState]]) -> None:
        self._states = states

    def describe(self) -> Iterator[Metric]:  # no scrape at registration
        yield from self._families([])

    def collect(self) -> Iterator[Metric]:
        try:
            states = self._states()
        except (ValueError, OSError, sqlite3.Error) as exc:  # a closed Runtime, an unreadable home
            logger.warning("the breaker series are left out of this scrape: %s", exc)
            states = []  # a scrape never fails: the request counters matter most when things break
        yield from self._families(states)

    def _families(self, states: list[BreakerState]) -> Iterator[Metric]:
        state = GaugeMetricFamily(
            "glovebox_breaker_state", "Circuit breakers: 2 open, 1 half-open, 0 closed.", labels=["scope", "key"]
        )
        failures = GaugeMetricFamily(
            "glovebox_breaker_failures", "Failures counted within a breaker's window.", labels=["scope", "key"]
        )
        for entry in states:
            state.add_metric([entry.scope, entry.key], _STATE_VALUE.get(entry.state, 0))
            failures.add_metric([entry.scope, entry.key], entry.failures)
        yield state
        yield failures


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
