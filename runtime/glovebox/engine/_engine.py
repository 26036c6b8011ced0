"""Engines shared per process: one per ``EngineSettings``, made on first need.

An engine is made when a Runtime first needs wasmtime (a call or a
registration), never when a Runtime is opened: listing tools, reading the audit
log or checking a policy touches no engine. Each has an epoch ticker (a native
POSIX timer where available, else a Python thread: see ``_ticker``) that runs
while at least one Runtime holds the engine (``acquire`` / ``release``) and
stops with the last one; a later Runtime starts it again. Engines live as long
as the process, so a tick never reaches a freed engine.
Fuel metering and epoch interruption are always on: every store gets a fuel
budget and an epoch deadline. How instances are allocated (a pool sized to the
address space, or on demand) is decided in ``_allocation``.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime.component import Component

from ._allocation import ON_DEMAND, Allocation, address_space_budget, engine_config, plan_allocation
from ._settings import EngineSettings
from ._ticker import Ticker, start_ticker

__all__ = ["EngineSettings", "SharedEngine", "acquire_engine", "get_engine"]

logger = logging.getLogger("glovebox")

MAX_LOADED_COMPONENTS = 256


class SharedEngine:
    """A wasmtime Engine, its epoch ticker and its loaded components.

    Attributes:
        settings: the settings it was asked for (the compile cache uses them).
        allocation: what its instance allocator actually reserved.
        fingerprint: the compile-cache key of its code settings.
    """

    def __init__(self, settings: EngineSettings | None = None) -> None:
        self.settings = settings or EngineSettings()
        self.engine, self.allocation = _make_engine(self.settings)
        self.fingerprint = self.settings.fingerprint()
        self._components: OrderedDict[str, Component] = OrderedDict()
        self._lock = threading.Lock()
        self._users = 0
        self._users_lock = threading.Lock()
        self._ticker: Ticker | None = None
        self._companions: list[Any] = []
        #: Things made once per engine by the layers above (the native core): see ``companion``.
        self._made: dict[str, Any] = {}

    # -- users and the epoch ticker -------------------------------------------

    def acquire(self) -> None:
        """Count one more user; the first starts the epoch ticker."""
        with self._users_lock:
            self._users += 1
            if self._ticker is None:
                self._ticker = start_ticker(self.engine, self.settings.epoch_tick_ms)
                for companion in self._companions:
                    companion.start_ticker(self.settings.epoch_tick_ms)

    def release(self) -> None:
        """Count one user fewer; the last stops the epoch ticker (deletes its timer or joins its thread).

        Raises:
            ValueError: more releases than acquisitions.
        """
        with self._users_lock:
            if self._users == 0:
                raise ValueError("this engine has no users to release")
            self._users -= 1
            if self._users == 0 and self._ticker is not None:
                self._ticker.stop()
                self._ticker = None
                for companion in self._companions:
                    companion.stop_ticker()

    def companion(self, name: str, make: Callable[[], Any]) -> Any:
        """The object ``name`` made once per engine by ``make`` (None stays None), its epoch ticker in step.

        A companion with an epoch of its own (the native core's engine, see
        ``glovebox.sandbox._native``) has ``start_ticker(tick_ms)`` and
        ``stop_ticker()``: they are called when this engine's ticker starts and stops.
        """
        with self._users_lock:
            if name not in self._made:
                made = self._made[name] = make()
                if made is not None and hasattr(made, "start_ticker"):
                    self._companions.append(made)
                    if self._ticker is not None:
                        made.start_ticker(self.settings.epoch_tick_ms)
            return self._made[name]

    @property
    def ticker(self) -> Ticker | None:
        """The epoch ticker while the engine has users, else None."""
        return self._ticker

    def deadline_ticks(self, timeout_ms: int) -> int:
        """Epoch ticks that cover ``timeout_ms`` (plus one for the partial tick)."""
        return int(timeout_ms / self.settings.epoch_tick_ms) + 1

    # -- loaded components -----------------------------------------------------

    def cached(self, digest: str) -> Component | None:
        """A component already loaded in this process, if any."""
        with self._lock:
            hit = self._components.get(digest)
            if hit is not None:
                self._components.move_to_end(digest)
            return hit

    def remember(self, digest: str, component: Component) -> None:
        """Keep a loaded component in memory (least recently used are dropped)."""
        with self._lock:
            self._components[digest] = component
            while len(self._components) > MAX_LOADED_COMPONENTS:
                self._components.popitem(last=False)

    def load(self, compiled: Path) -> Component:
        """Memory-map a serialized component made with this engine's code settings.

        Loading from the file (never from bytes) lets every instance map the
        initial memory image copy-on-write from the page cache (see ``_codegen``).
        """
        return Component.deserialize_file(self.engine, str(compiled))

    def forget(self, digest: str) -> None:
        """Drop a component from the in-memory cache."""
        with self._lock:
            self._components.pop(digest, None)


def _make_engine(settings: EngineSettings) -> tuple[wasmtime.Engine, Allocation]:
    """A pooled engine that fits the address space, else an on-demand one; logs what it chose.

    wasmtime aborts the process when it cannot map a pool, so the pool is
    sized before it is asked (``plan_allocation``); a refusal it does report
    also falls back to on-demand allocation.
    """
    wanted = plan_allocation(settings, None)
    allocation = plan_allocation(settings, address_space_budget())
    if allocation.pooled:
        try:
            engine = wasmtime.Engine(engine_config(settings, allocation))
        except wasmtime.WasmtimeError as exc:
            logger.warning("cannot create %s (%s); allocating instances on demand", allocation.describe(), exc)
            return wasmtime.Engine(engine_config(settings, ON_DEMAND)), ON_DEMAND
        if allocation != wanted:
            logger.info("the address-space limit cannot hold %s; using %s", wanted.describe(), allocation.describe())
        return engine, allocation
    if wanted.pooled:
        logger.warning("the address-space limit cannot hold even a small instance pool; allocating instances on demand")
    return wasmtime.Engine(engine_config(settings, ON_DEMAND)), ON_DEMAND


_engines: dict[EngineSettings, SharedEngine] = {}
_engines_lock = threading.Lock()


def get_engine(settings: EngineSettings | None = None) -> SharedEngine:
    """The process's engine for ``settings`` (default settings if None), created on first use.

    This does not start the epoch ticker: ``acquire_engine`` does.
    """
    key = settings if settings is not None else EngineSettings()
    with _engines_lock:
        shared = _engines.get(key)
        if shared is None:
            shared = _engines[key] = SharedEngine(key)
        return shared


def acquire_engine(settings: EngineSettings) -> SharedEngine:
    """The process's engine for ``settings``, with one more user (its ticker running)."""
    shared = get_engine(settings)
    shared.acquire()
    return shared
