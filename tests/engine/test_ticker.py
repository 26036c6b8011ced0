"""The epoch ticker: native where it can be, a Python thread where it cannot, stopped with the last user."""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import glovebox
from glovebox import EngineSettings
from glovebox.engine._engine import SharedEngine
from glovebox.engine._ticker import TimerApi, native_timers
from glovebox.model._manifest import HOST_MAXIMA

BuildGuest = Callable[[str], Path]

#: A small pool, so that the engines these tests make reserve gigabytes, not terabytes.
SMALL_POOL = {"total_memories": 24, "total_tables": 48, "total_core_instances": 96, "total_component_instances": 24}
#: Fuel at the host maximum: only the epoch deadline (so, a running ticker) stops the loop early.
LOOP_LIMITS = {"timeout_ms": 20, "fuel": HOST_MAXIMA.fuel}

native_only = pytest.mark.skipif(native_timers() is None, reason="no native epoch timer on this system")


def small(**changes: Any) -> EngineSettings:
    return EngineSettings(**{**SMALL_POOL, **changes})


def shared_of(rt: glovebox.Runtime) -> SharedEngine:
    assert rt._wasm_parts is not None, "this Runtime has not made its engine yet"
    return rt._wasm_parts.shared


def posix_timers() -> int:
    """POSIX timers this process holds, as the kernel lists them."""
    return sum(line.startswith("ID:") for line in Path("/proc/self/timers").read_text().splitlines())


def loop_times_out(rt: glovebox.Runtime, build_guest: BuildGuest) -> str:
    rt.register(build_guest("loop_forever"), manifest={"name": "loop", "limits": LOOP_LIMITS})
    return rt.call("loop", None).code or ""


@native_only
def test_native_ticker_stops_an_endless_guest(tmp_path: Path, build_guest: BuildGuest) -> None:
    with glovebox.Runtime(home=tmp_path, engine=small(total_memories=23)) as rt:
        assert loop_times_out(rt, build_guest) == "timeout"
        ticker = shared_of(rt).ticker
        assert ticker is not None and ticker.kind == "native" and ticker.running


@native_only
def test_native_timer_is_deleted_after_the_last_release(tmp_path: Path, build_guest: BuildGuest) -> None:
    settings = small(total_memories=22)
    before = posix_timers()
    a = glovebox.Runtime(home=tmp_path, engine=settings)
    b = glovebox.Runtime(home=tmp_path, engine=settings)
    a.register(build_guest("echo"), manifest={"name": "echo"})
    assert b.call("echo", 1).output == 1
    shared = shared_of(a)
    ticker = shared.ticker
    assert ticker is not None and ticker.kind == "native"
    assert posix_timers() == before + 1
    a.close()
    assert posix_timers() == before + 1 and ticker.running
    b.close()
    assert posix_timers() == before
    assert shared.ticker is None and not ticker.running


def test_forced_fallback_ticks_from_a_thread(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("glovebox.engine._ticker.native_timers", lambda: None)
    before = posix_timers()
    with glovebox.Runtime(home=tmp_path, engine=small(total_memories=21)) as rt:
        assert loop_times_out(rt, build_guest) == "timeout"
        ticker = shared_of(rt).ticker
        assert ticker is not None and ticker.kind == "thread" and ticker.running
        assert posix_timers() == before
    assert not ticker.running


@native_only
def test_a_refused_timer_falls_back_to_a_thread_and_says_so(
    tmp_path: Path, build_guest: BuildGuest, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # An invalid clock makes the real timer_create fail (EINVAL).
    refusing = TimerApi(ctypes.CDLL(None, use_errno=True), clock_id=-1)
    monkeypatch.setattr("glovebox.engine._ticker.native_timers", lambda: refusing)
    with (
        caplog.at_level(logging.WARNING, logger="glovebox"),
        glovebox.Runtime(home=tmp_path, engine=small(total_memories=20)) as rt,
    ):
        assert loop_times_out(rt, build_guest) == "timeout"
        ticker = shared_of(rt).ticker
        assert ticker is not None and ticker.kind == "thread"
    assert any("cannot start a native epoch timer" in r.getMessage() for r in caplog.records)


def test_the_choice_is_made_once_per_process() -> None:
    assert native_timers() is native_timers()
