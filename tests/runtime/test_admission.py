"""Admission control: ``max_in_flight``, ``max_queued`` and ``overloaded``, at every door.

Calls are held in a real upstream on 127.0.0.1 (the ``http_client`` guest
fetching ``/hold``, which answers only when the test releases it or once the
number of requests it expects are all waiting), so "in flight" means what it
means in production: a sandbox blocked in a host function. Concurrency is
proven on the server side (how many requests it saw waiting at once), never
by timing.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.runtime._admission import Admission
from glovebox.servers import create_app

from ..capabilities.test_http import QuietHandler
from ..conftest import metric_samples

BuildGuest = Callable[[str], Path]
#: The longest a held request waits for its release (the test releases it sooner).
HOLD_SECONDS = 30.0


class HoldServer(ThreadingHTTPServer):
    """``GET /hold`` waits until released (or until ``expect`` requests wait together), then answers {}."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HoldHandler)
        self.cond = threading.Condition()
        self.release = threading.Event()
        self.waiting = 0
        self.peak = 0
        self.seen = 0
        self.expect: int | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hold"

    def wait_for_waiting(self, n: int) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: self.waiting >= n, timeout=HOLD_SECONDS), (self.waiting, n)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass


class _HoldHandler(QuietHandler):
    server: HoldServer

    def do_GET(self) -> None:
        srv = self.server
        with srv.cond:
            srv.seen += 1
            srv.waiting += 1
            srv.peak = max(srv.peak, srv.waiting)
            srv.cond.notify_all()
            expect = srv.expect
            if expect is not None:  # a barrier: answer once `expect` requests wait together
                srv.cond.wait_for(lambda: srv.peak >= expect or srv.release.is_set(), timeout=HOLD_SECONDS)
        if expect is None:
            srv.release.wait(HOLD_SECONDS)
        with srv.cond:
            srv.waiting -= 1
        self._reply(200, b"{}")


@pytest.fixture
def hold() -> Iterator[HoldServer]:
    """A real HTTP server on 127.0.0.1 that holds requests until released."""
    httpd = HoldServer()
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.release.set()
        with httpd.cond:
            httpd.cond.notify_all()
        httpd.shutdown()
        httpd.server_close()


def held_runtime(home: Path, build_guest: BuildGuest, hold: HoldServer, **options: Any) -> glovebox.Runtime:
    """A Runtime granted the hold server, with ``http_client`` registered as ``hc``."""
    rule = {
        "host": "127.0.0.1",
        "schemes": ["http"],
        "ports": [hold.port],
        "methods": ["GET"],
        "paths": ["/**"],
        "allow_private": True,
    }
    grants = {"http": [rule], "http_limits": {"request_timeout_ms": 60_000}}
    rt = glovebox.Runtime(home=home, grants=grants, **options)
    manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": 60_000}}
    rt.register(build_guest("http_client"), manifest=manifest)
    return rt


def held_calls(rt: glovebox.Runtime, hold: HoldServer, n: int) -> tuple[ThreadPoolExecutor, list[Future[Any]]]:
    """Start ``n`` calls of ``hc`` on threads; they wait in the hold server (or in line)."""
    pool = ThreadPoolExecutor(max_workers=n)
    return pool, [pool.submit(rt.call, "hc", {"url": hold.url()}) for _ in range(n)]


def until(predicate: Callable[[], bool]) -> None:
    """Wait until ``predicate`` holds (a state change in another thread), failing after HOLD_SECONDS."""
    deadline = time.monotonic() + HOLD_SECONDS
    while not predicate():
        assert time.monotonic() < deadline, "the state was never reached"
        time.sleep(0.002)


def outcomes(home: Path) -> list[str]:
    audit = glovebox.AuditLog(home)
    try:
        return [row["outcome"] for row in audit.records()]
    finally:
        audit.close()


def assert_overloaded(result: glovebox.CallResult) -> None:
    assert not result.ok
    assert result.code == "overloaded", result.to_dict()
    assert result.error is not None and result.error.retryable is True
    retry = result.error.details["retry_after_ms"]
    assert isinstance(retry, int) and retry >= 1
    assert result.meta["fuel_used"] == 0


# -- the bound ------------------------------------------------------------------------------------


def test_overloaded_exactly_at_the_bound(_isolated_env: Path, build_guest: BuildGuest, hold: HoldServer) -> None:
    with held_runtime(_isolated_env, build_guest, hold, max_in_flight=3, max_queued=0) as rt:
        pool, held = held_calls(rt, hold, 3)
        hold.wait_for_waiting(3)
        assert rt.in_flight == 3
        refused = rt.call("hc", {"url": hold.url()})
        assert_overloaded(refused)
        assert refused.error is not None and refused.error.details["max_in_flight"] == 3
        assert hold.seen == 3  # the refused call never reached the upstream
        hold.release.set()
        assert all(f.result().ok for f in held), [f.result().to_dict() for f in held]
        pool.shutdown()
        assert rt.in_flight == 0
        assert rt.call("hc", {"url": hold.url()}).ok  # the slots came back
    assert sorted(outcomes(_isolated_env)) == ["ok"] * 4 + ["overloaded"]


def test_a_full_line_refuses_and_nothing_is_lost(
    _isolated_env: Path, build_guest: BuildGuest, hold: HoldServer
) -> None:
    with held_runtime(_isolated_env, build_guest, hold, max_in_flight=2, max_queued=2) as rt:
        pool, held = held_calls(rt, hold, 2)
        hold.wait_for_waiting(2)
        queued_pool, queued = held_calls(rt, hold, 2)
        until(lambda: rt.queued == 2)
        refused = [rt.call("hc", {"url": hold.url()}) for _ in range(5)]
        for result in refused:
            assert_overloaded(result)
        assert hold.seen == 2
        hold.release.set()
        ran = [f.result() for f in held + queued]
        pool.shutdown()
        queued_pool.shutdown()
        assert all(result.ok for result in ran), [r.to_dict() for r in ran]
        assert hold.seen == 4  # every admitted call ran, every other answered overloaded
        assert (rt.in_flight, rt.queued) == (0, 0)
    assert sorted(outcomes(_isolated_env)) == ["ok"] * 4 + ["overloaded"] * 5


def test_acall_runs_more_calls_at_once_than_cores(
    _isolated_env: Path, build_guest: BuildGuest, hold: HoldServer
) -> None:
    n = max(16, 4 * (os.cpu_count() or 1))
    hold.expect = n  # each request answers once n are waiting together
    with held_runtime(_isolated_env, build_guest, hold) as rt:

        async def burst() -> list[glovebox.CallResult]:
            return await asyncio.gather(*(rt.acall("hc", {"url": hold.url()}) for _ in range(n)))

        results = asyncio.run(burst())
    assert all(result.ok for result in results), [r.to_dict() for r in results if not r.ok][:1]
    assert hold.peak == n


def test_acall_refused_beyond_the_bound_is_audited(
    _isolated_env: Path, build_guest: BuildGuest, hold: HoldServer
) -> None:
    with held_runtime(_isolated_env, build_guest, hold, max_in_flight=2, max_queued=1) as rt:

        async def burst() -> list[glovebox.CallResult]:
            calls = [asyncio.ensure_future(rt.acall("hc", {"url": hold.url()})) for _ in range(6)]
            await asyncio.to_thread(hold.wait_for_waiting, 2)
            while rt.queued < 1:
                await asyncio.sleep(0.002)
            hold.release.set()
            return list(await asyncio.gather(*calls))

        results = asyncio.run(burst())
    assert sorted(r.code or "ok" for r in results) == ["ok"] * 3 + ["overloaded"] * 3
    assert sorted(outcomes(_isolated_env)) == ["ok"] * 3 + ["overloaded"] * 3


def test_a_full_instance_pool_is_overloaded(_isolated_env: Path, build_guest: BuildGuest, hold: HoldServer) -> None:
    tiny = glovebox.EngineSettings(
        total_memories=2,  # a C tool is 1 memory, 2 tables and 3 core instances
        total_tables=4,
        total_core_instances=8,
        total_component_instances=2,
        max_core_instances_per_component=4,
        max_memories_per_component=2,
    )
    with held_runtime(_isolated_env, build_guest, hold, engine=tiny, max_in_flight=10) as rt:
        pool, held = held_calls(rt, hold, 2)
        hold.wait_for_waiting(2)
        refused = rt.call("hc", {"url": hold.url()})
        assert_overloaded(refused)
        assert refused.error is not None and refused.error.details["reason"] == "instance pool full"
        hold.release.set()
        assert all(f.result().ok for f in held)
        pool.shutdown()
    assert sorted(outcomes(_isolated_env)) == ["ok"] * 2 + ["overloaded"]


def test_the_http_api_answers_503_with_the_envelope(
    _isolated_env: Path, build_guest: BuildGuest, hold: HoldServer, serve_app: Callable[[object], str]
) -> None:
    with held_runtime(_isolated_env, build_guest, hold, max_in_flight=1, max_queued=0) as rt:
        url = serve_app(create_app(rt, insecure_anonymous=True))
        pool, held = held_calls(rt, hold, 1)  # a library call holds the one slot the server shares
        hold.wait_for_waiting(1)
        answer = httpx.post(f"{url}/v1/tools/hc/call", json={"input": {"url": hold.url()}}, timeout=30)
        assert answer.status_code == 503
        envelope = answer.json()
        assert envelope["ok"] is False
        assert envelope["error"]["code"] == "overloaded"
        assert envelope["error"]["retryable"] is True
        retry_ms = envelope["error"]["details"]["retry_after_ms"]
        assert int(answer.headers["Retry-After"]) == -(-retry_ms // 1000)
        assert envelope["meta"]["call_id"]
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
        calls = metric_samples(metrics, "glovebox_calls_total")
        assert [n for labels, n in calls if labels["outcome"] == "overloaded"] == [1]
        hold.release.set()
        assert held[0].result().ok
        pool.shutdown()
    assert sorted(outcomes(_isolated_env)) == ["ok", "overloaded"]


# -- the gate itself ------------------------------------------------------------------------------


def test_a_cancelled_waiter_gives_its_place_back() -> None:
    gate = Admission(max_in_flight=1, max_queued=1)

    async def scenario() -> None:
        await gate.aenter()
        waiter = asyncio.ensure_future(gate.aenter())
        while gate.queued < 1:
            await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert (gate.in_flight, gate.queued) == (1, 0)
        gate.leave()
        assert gate.in_flight == 0

    asyncio.run(scenario())


def test_a_waiter_cancelled_after_its_slot_was_handed_over_passes_it_on() -> None:
    gate = Admission(max_in_flight=1, max_queued=2)

    async def scenario() -> None:
        await gate.aenter()
        first = asyncio.ensure_future(gate.aenter())
        second = asyncio.ensure_future(gate.aenter())
        while gate.queued < 2:
            await asyncio.sleep(0)
        gate.leave()  # hands the slot to `first` (its wake-up is scheduled, not yet run)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        await second  # the slot went on to the next in line
        assert (gate.in_flight, gate.queued) == (1, 0)
        gate.leave()
        assert gate.in_flight == 0

    asyncio.run(scenario())


def test_waiters_are_served_in_order() -> None:
    gate = Admission(max_in_flight=1, max_queued=3)
    gate.enter()
    order: list[int] = []

    def wait(i: int) -> None:
        gate.enter()
        order.append(i)
        gate.leave()

    threads = []
    for i in range(3):
        threads.append(threading.Thread(target=wait, args=(i,)))
        threads[-1].start()
        until(lambda i=i: gate.queued == i + 1)  # type: ignore[misc]
    with pytest.raises(glovebox.Overloaded):
        gate.enter()
    gate.leave()
    for thread in threads:
        thread.join()
    assert order == [0, 1, 2]
    assert (gate.in_flight, gate.queued) == (0, 0)


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [("max_in_flight", 0, ValueError), ("max_queued", -1, ValueError), ("max_in_flight", 2.5, TypeError)],
)
def test_bad_bounds_are_refused(_isolated_env: Path, field: str, value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        glovebox.Runtime(home=_isolated_env, **{field: value})


def test_the_default_pool_holds_max_in_flight_instances() -> None:
    settings = glovebox.EngineSettings().sized_for(50_000)
    assert settings.total_memories >= 50_000 and settings.total_component_instances >= 50_000
    assert glovebox.EngineSettings().sized_for(10_000) == glovebox.EngineSettings()


def test_max_in_flight_is_held_to_what_the_process_can_map(
    _isolated_env: Path, build_guest: BuildGuest, hold: HoldServer
) -> None:
    """Past vm.max_map_count a process aborts (wasmtime cannot map a thread's signal stack): the bound stops short."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("glovebox.runtime._runtime.mapping_bound", lambda: 3)
        rt = held_runtime(_isolated_env, build_guest, hold, max_in_flight=50, max_queued=0)
    with rt:
        assert rt._admission.max_in_flight == 3
        pool, held = held_calls(rt, hold, 3)
        hold.wait_for_waiting(3)
        assert_overloaded(rt.call("hc", {"url": hold.url()}))
        hold.release.set()
        assert all(job.result(HOLD_SECONDS).ok for job in held)
        pool.shutdown()
    with glovebox.Runtime(home=_isolated_env, max_in_flight=2) as small:
        assert small._admission.max_in_flight == 2  # a bound below the mapping bound is kept
