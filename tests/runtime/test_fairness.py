"""Compute slots: calls released at once all finish, at most ``max_running`` running at a time.

Calls are held in a real upstream on 127.0.0.1 (the ``http_client`` guest); in
the herd test the upstream is its own process, holds every request until all
of them wait, then answers them all at once. How many calls run host Python at
once is counted, never timed: the host's last step before handing an answer
to the guest (``HttpCapability._deliver``) is wrapped in a counter that stays
inside for a while, as a call doing real work would. Without compute slots
every woken call is in there together; with them, never more than
``max_running``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox.capabilities._fetch import HttpCapability
from glovebox.sandbox._compute import ComputeSlots, waiting

from .test_admission import HoldServer, held_runtime, hold, until  # noqa: F401 - `hold` is a fixture
from .test_density import BARRIER, upstream_process

BuildGuest = Callable[[str], Path]
#: Calls released at once.
HERD = 500
#: Compute slots in the herd test.
RUNNING = 4
#: How long the wrapped step keeps a call inside (it stands for host work done under a slot).
INSIDE_S = 0.02


@pytest.fixture
def releaser() -> Iterator[int]:
    """The port of an upstream that answers all :data:`HERD` requests at once."""
    with upstream_process(BARRIER, str(HERD), "all-at-once") as port:
        yield port


class Inside:
    """Counts the threads inside a wrapped function at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                self.now += 1
                self.peak = max(self.peak, self.now)
            try:
                time.sleep(INSIDE_S)
                return function(*args, **kwargs)
            finally:
                with self.lock:
                    self.now -= 1

        return counted


def test_a_herd_released_at_once_all_finish_with_bounded_running_calls(
    _isolated_env: Path, build_guest: BuildGuest, releaser: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    inside = Inside()
    monkeypatch.setattr(HttpCapability, "_deliver", inside.wrap(HttpCapability._deliver))
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [releaser], "paths": ["/**"], "allow_private": True}
    grants = {"http": [rule], "http_limits": {"request_timeout_ms": 60_000}}
    with glovebox.Runtime(home=_isolated_env, grants=grants, max_running=RUNNING) as rt:
        manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": 60_000}}
        rt.register(build_guest("http_client"), manifest=manifest)
        url = f"http://127.0.0.1:{releaser}/hold"
        with ThreadPoolExecutor(max_workers=HERD) as pool:
            results = list(pool.map(lambda _: rt.call("hc", {"url": url}), range(HERD)))
        assert rt._compute.running == 0
    failed = [r.to_dict() for r in results if not r.ok or r.output["status"] != "ok"]
    assert failed == [], (len(failed), failed[0])
    assert {r.output["body"] for r in results} == {f'{{"peak": {HERD}}}'}  # all were held at once
    assert 1 <= inside.peak <= RUNNING, inside.peak


def test_a_call_that_waits_on_the_network_holds_no_compute_slot(
    _isolated_env: Path,
    build_guest: BuildGuest,
    hold: HoldServer,  # noqa: F811  (the fixture imported above)
) -> None:
    with held_runtime(_isolated_env, build_guest, hold, max_running=1) as rt:
        rt.register(build_guest("echo"), manifest={"name": "echo"})
        with ThreadPoolExecutor(max_workers=3) as pool:
            held = [pool.submit(rt.call, "hc", {"url": hold.url()}) for _ in range(3)]
            hold.wait_for_waiting(3)
            # The server sees a request before its caller reaches recv and gives its slot up.
            until(lambda: rt._compute.running == 0)
            assert rt.call("echo", {"x": 1}).ok  # runs while three calls wait upstream
            hold.release.set()
            assert all(f.result(timeout=60).ok for f in held), [f.result().to_dict() for f in held]
        assert rt._compute.running == 0


def test_a_deadline_that_passes_while_waiting_for_a_slot_is_a_timeout(
    _isolated_env: Path,
    build_guest: BuildGuest,
    hold: HoldServer,  # noqa: F811  (the fixture imported above)
) -> None:
    rule = {"host": "127.0.0.1", "schemes": ["http"], "ports": [hold.port], "paths": ["/**"], "allow_private": True}
    grants = {"http": [rule], "http_limits": {"request_timeout_ms": 60_000}}
    with glovebox.Runtime(home=_isolated_env, grants=grants, max_running=1) as rt:
        manifest = {"name": "hc", "capabilities": {"http": [rule]}, "limits": {"timeout_ms": 1500}}
        rt.register(build_guest("http_client"), manifest=manifest)
        with ThreadPoolExecutor(max_workers=1) as pool:
            call = pool.submit(rt.call, "hc", {"url": hold.url()})
            hold.wait_for_waiting(1)
            until(lambda: rt._compute.running == 0)  # it has reached recv and given its slot up
            assert rt._compute.acquire(timeout=0)  # the only slot: the call can never run again
            try:
                hold.release.set()
                result = call.result(timeout=60)  # it ends by its own deadline, without the slot
            finally:
                rt._compute.release()
        assert result.code == "timeout", result.to_dict()
        assert result.error is not None and result.error.details == {"timeout_ms": 1500}
        assert rt._compute.running == 0
        hold_answer = rt.call("hc", {"url": hold.url()})
        assert hold_answer.ok and hold_answer.output["status"] == "ok", hold_answer.to_dict()


# -- the semaphore --------------------------------------------------------------------------------


def test_slots_are_handed_over_first_come_first_served() -> None:
    slots = ComputeSlots(1)
    assert slots.acquire(timeout=0)
    order: list[int] = []

    def wait_then_note(i: int) -> None:
        assert slots.acquire()
        order.append(i)
        slots.release()

    threads = []
    for i in range(8):
        thread = threading.Thread(target=wait_then_note, args=(i,))
        thread.start()
        threads.append(thread)
        until(lambda i=i: slots.waiting == i + 1)  # type: ignore[misc]
    slots.release()
    for thread in threads:
        thread.join(timeout=60)
    assert order == list(range(8))
    assert (slots.running, slots.waiting) == (0, 0)


def test_a_wait_that_times_out_leaves_the_line() -> None:
    slots = ComputeSlots(1)
    assert slots.acquire()
    assert slots.acquire(timeout=0.01) is False
    assert slots.waiting == 0
    slots.release()
    assert slots.running == 0
    assert slots.acquire(timeout=0)


def test_enter_is_reentrant_and_waiting_gives_the_slot_up() -> None:
    slots = ComputeSlots(1)
    outer = slots.enter()
    assert outer and slots.enter() is False  # the same thread never waits for itself
    with waiting():
        assert slots.running == 0
        assert slots.acquire(timeout=0)  # another holder may run meanwhile
        slots.release()
    assert slots.running == 1
    slots.leave(False)
    assert slots.running == 1
    slots.leave(outer)
    assert slots.running == 0
    with waiting():  # no slot held: nothing to give up
        assert slots.running == 0


@pytest.mark.parametrize("bad", [0, -1])
def test_max_running_below_one_is_refused(bad: int, _isolated_env: Path) -> None:
    with pytest.raises(ValueError, match="max_running must be at least 1"):
        glovebox.Runtime(home=_isolated_env, max_running=bad)
    with pytest.raises(TypeError, match="max_running must be an int"):
        glovebox.Runtime(home=_isolated_env, max_running=2.5)  # type: ignore[arg-type]
