"""Epoch tickers: what advances an engine's epoch once per tick while it has users.

Two kinds, chosen once per process and logged on the ``glovebox`` logger:

- ``native`` (Linux with glibc, x86_64 or aarch64): a POSIX timer,
  ``timer_create(CLOCK_MONOTONIC)`` with ``SIGEV_THREAD``, whose notify
  function is wasmtime's own C function ``wasmtime_engine_increment_epoch`` and
  whose ``sigev_value`` is an engine pointer. glibc (2.36 measured) catches each
  expiration in its timer helper thread and starts one short-lived native
  thread that makes the call: no Python and no GIL on the way, so a host busy
  with Python work does not delay deadlines. ``union sigval`` is passed by
  value; on x86_64 (System V) and aarch64 (AAPCS64) an 8-byte union of an int
  and a pointer travels in the first integer register, exactly like the
  ``const wasm_engine_t *`` the function takes.
- ``thread``: a Python thread that sleeps one tick and increments the epoch
  (catching up after oversleeping). It needs the GIL, so a busy host makes
  deadlines late. It is the fallback where the native timer is unavailable
  (another system or C library) or refused (``timer_create`` fails).

The timer is given its own handle on the engine (``wasmtime_engine_clone``),
made once per engine and never freed: a notification already on its way when
the timer is deleted, or one arriving while the interpreter shuts down, always
finds a live engine.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import platform
import sys
import threading
import time

import wasmtime
import wasmtime._ffi as ffi

__all__ = ["NativeTicker", "ThreadTicker", "Ticker", "TimerApi", "native_timers", "start_ticker"]

logger = logging.getLogger("glovebox")

CLOCK_MONOTONIC = 1
SIGEV_THREAD = 2
_ARCHES = ("x86_64", "aarch64", "arm64")


class _SigEvent(ctypes.Structure):
    """Linux ``struct sigevent`` (64 bytes) with the ``SIGEV_THREAD`` members."""

    _fields_ = [
        ("sigev_value", ctypes.c_void_p),
        ("sigev_signo", ctypes.c_int),
        ("sigev_notify", ctypes.c_int),
        ("sigev_notify_function", ctypes.c_void_p),
        ("sigev_notify_attributes", ctypes.c_void_p),
        ("_pad", ctypes.c_int * 8),
    ]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


class TimerApi:
    """The C library's POSIX timer functions and wasmtime's epoch function, through ctypes.

    Attributes:
        clock_id: the clock the timers count (``CLOCK_MONOTONIC``).
    """

    def __init__(self, libc: ctypes.CDLL, clock_id: int = CLOCK_MONOTONIC) -> None:
        self.clock_id = clock_id
        self._create = libc.timer_create
        self._create.argtypes = [ctypes.c_int, ctypes.POINTER(_SigEvent), ctypes.POINTER(ctypes.c_void_p)]
        self._create.restype = ctypes.c_int
        self._settime = libc.timer_settime
        self._settime.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_ITimerSpec), ctypes.c_void_p]
        self._settime.restype = ctypes.c_int
        self._delete = libc.timer_delete
        self._delete.argtypes = [ctypes.c_void_p]
        self._delete.restype = ctypes.c_int
        self._increment = ctypes.cast(ffi.dll.wasmtime_engine_increment_epoch, ctypes.c_void_p).value

    def create(self, engine_address: int, period_ns: int) -> ctypes.c_void_p:
        """Create and arm a periodic timer that increments the epoch of the engine at ``engine_address``.

        Raises:
            OSError: the C library refused the timer.
        """
        event = _SigEvent(engine_address, 0, SIGEV_THREAD, self._increment, None)
        timer = ctypes.c_void_p()
        if self._create(self.clock_id, ctypes.byref(event), ctypes.byref(timer)) != 0:
            raise _os_error("timer_create")
        tick = _TimeSpec(period_ns // 1_000_000_000, period_ns % 1_000_000_000)
        if self._settime(timer, 0, ctypes.byref(_ITimerSpec(tick, tick)), None) != 0:
            error = _os_error("timer_settime")
            self._delete(timer)
            raise error
        return timer

    def delete(self, timer: ctypes.c_void_p) -> None:
        """Disarm and delete a timer (notifications already started may still finish)."""
        self._delete(timer)


def _os_error(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def _probe() -> TimerApi | None:
    """The native timer API, or None (with the reason logged) where it cannot be used."""
    machine = platform.machine().lower()
    libc_version = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    if not sys.platform.startswith("linux") or machine not in _ARCHES or not libc_version:
        reason = f"no native epoch timer on {sys.platform}/{machine} ({libc_version or 'not glibc'})"
        logger.info("%s; epoch ticks come from a Python thread", reason)
        return None
    try:
        api = TimerApi(ctypes.CDLL(None, use_errno=True))
    except (AttributeError, OSError) as exc:
        logger.info("no native epoch timer (%s); epoch ticks come from a Python thread", exc)
        return None
    logger.info("epoch ticks come from POSIX timers (%s, no GIL)", libc_version)
    return api


@functools.cache
def native_timers() -> TimerApi | None:
    """The native timer API, probed once per process; None where it is unavailable."""
    return _probe()


class Ticker:
    """Advances an engine's epoch once per tick until stopped.

    Attributes:
        kind: ``"native"`` (a POSIX timer) or ``"thread"`` (a Python thread).
    """

    kind = ""

    @property
    def running(self) -> bool:
        """Whether the ticker still ticks."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop ticking; returns once no further tick will be started."""
        raise NotImplementedError


class ThreadTicker(Ticker):
    """A Python thread that increments the epoch once per tick (the fallback)."""

    kind = "thread"

    def __init__(self, engine: wasmtime.Engine, tick_ms: float) -> None:
        self._engine = engine
        self._period = tick_ms / 1000.0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="glovebox-epoch", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        # Catch up on oversleeping so that one epoch stays one tick of real time.
        start, ticks = time.monotonic(), 0
        while not self._stop.wait(self._period):
            due = int((time.monotonic() - start) / self._period)
            while ticks < due:
                self._engine.increment_epoch()
                ticks += 1

    @property
    def running(self) -> bool:
        return self.thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        self.thread.join()


class NativeTicker(Ticker):
    """A POSIX timer whose expirations call ``wasmtime_engine_increment_epoch`` from native threads."""

    kind = "native"

    def __init__(self, api: TimerApi, engine: wasmtime.Engine, tick_ms: float) -> None:
        self._api = api
        self._timer: ctypes.c_void_p | None = api.create(_pinned_engine(engine), max(1, round(tick_ms * 1_000_000)))

    @property
    def running(self) -> bool:
        return self._timer is not None

    def stop(self) -> None:
        if self._timer is not None:
            self._api.delete(self._timer)
            self._timer = None


#: id(engine) -> (the engine, kept so that its id is never reused; the address of its clone).
_pinned: dict[int, tuple[wasmtime.Engine, int]] = {}
_pinned_lock = threading.Lock()


def _pinned_engine(engine: wasmtime.Engine) -> int:
    """The address of a handle on ``engine`` that is never freed (one per engine)."""
    with _pinned_lock:
        key = id(engine)
        if key not in _pinned:
            clone = ffi.wasmtime_engine_clone(engine.ptr())
            _pinned[key] = (engine, ctypes.cast(clone, ctypes.c_void_p).value or 0)
        return _pinned[key][1]


def start_ticker(engine: wasmtime.Engine, tick_ms: float) -> Ticker:
    """Start ticking ``engine``'s epoch every ``tick_ms``: natively where possible, else from a thread."""
    api = native_timers()
    if api is not None:
        try:
            return NativeTicker(api, engine, tick_ms)
        except OSError as exc:
            logger.warning("cannot start a native epoch timer (%s); ticking from a Python thread", exc)
    return ThreadTicker(engine, tick_ms)
