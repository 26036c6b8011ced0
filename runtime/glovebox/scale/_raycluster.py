"""RayRuntime: tool calls on N Ray actors (replicas), each holding a Runtime.

The driver keeps a Runtime of its own on ``home``: the registry every call is
resolved in, the approvals, ``explain``, and the audit rows of calls it answers
itself (an unknown tool, ``overloaded``, a replica that died, and the calls of
remote MCP tools, which it proxies: they have no wasm to ship). Every other call
goes to a replica: the router ranks the live replicas by rendezvous hashing on
the tool's digest, so a tool's calls stay on the replica that already holds its
compiled component, and takes the first one with no call in flight; when none is
idle it takes the least loaded one below ``max_pending``; when every replica
is at ``max_pending`` the call answers ``overloaded`` at once. A call carries
its tool's ``name@version`` and digest; the artifact itself travels only to a
replica whose home lacks it (``glovebox.scale._rayreplica``).

A replica that dies (``ray.kill``, its node lost) is replaced under the same
id; each call it held answers ``internal_error``, retryable, with
``details.replica``, audited by the driver unless the replica wrote the row first.

A RayRuntime is a :class:`Runtime` on the driver whose calls go to
:class:`RayWorkers` instead of down its own chain (the calls it answers itself
take that chain). ``run`` (code mode) runs the program on the driver, journaled
in the driver's home; each nested call takes the path of ``call`` to a replica,
carrying its call id and the run's context (``_procwire``'s ``run``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray
from ray.exceptions import ActorDiedError, RayError

from ..core import _settings
from ..core._errors import Overloaded, ToolNotFound
from ..model._result import CallResult, ToolInfo
from ..policy import Policy
from ..registry._registration import ManifestSource
from ..runtime._call import Call
from ..runtime._envelope import RUN_CONTEXT
from ..runtime._record import AuditRecorder
from ..runtime._runtime import Runtime
from ..runtime.executors import Workers
from . import _procwire
from ._raylane import Lane, LaneLost, LaneRefused, LaneUnreachable
from ._rayreplica import Artifact, Replica, policy_digest

__all__ = ["RayRuntime", "RayWorkers", "keep_trap_handlers"]

logger = logging.getLogger("glovebox")
#: Seconds ``close`` waits for each replica to finish its calls before killing it.
CLOSE_TIMEOUT_S = 60.0
#: Seconds the constructor waits for the replicas to open their Runtimes.
START_TIMEOUT_S = 300.0


@dataclass
class _Slot:
    replica_id: str
    actor: Any
    ready: Any  # ObjectRef of Replica.ready
    pending: int = 0
    alive: bool = True
    lane_ref: Any = None  # ObjectRef of Replica.open_lane
    #: The replica's lane (``glovebox.scale._raylane``), once known; None: calls go through Ray.
    lane: Lane | None = None
    lane_known: bool = False
    #: ``Replica.call_held`` and ``Replica.call`` as the call path sends them (see :func:`_quiet`).
    call_held: Any = None
    call: Any = None

    def __post_init__(self) -> None:
        self.call_held = _quiet(self.actor.call_held)
        self.call = _quiet(self.actor.call)


@dataclass
class _Booked:
    slot: _Slot
    ref: Any
    call_id: str
    name: str
    value: Any
    principal: str | None
    info: ToolInfo
    data: bytes  # the request as a replica reads it (``_procwire``), kept to send again with the artifact
    lane: Lane | None = None  # the call goes on this lane (its ``ref`` is None until sent through Ray)
    started: float = field(default_factory=time.perf_counter)
    run: dict[str, Any] | None = None

    @property
    def tool(self) -> str:
        return f"{self.info.name}@{self.info.version}"


class RayRuntime(Runtime):
    """Runs calls on ``replicas`` Ray actors, each holding a Runtime; same calls as :class:`Runtime`.

    Args:
        replicas: how many replica actors.
        address: the Ray cluster to join (``ray.init(address=...)``); None joins the
            one this process already joined, else starts a local one (no dashboard).
        home: the driver's home: the registry calls are resolved in, approvals,
            and its audit chain (default ``GLOVEBOX_HOME``).
        policy: as for :class:`Runtime`; a file must be at the same path on every node.
        threads: calls a replica runs at once (the actor's ``max_concurrency``).
        max_pending: calls booked on one replica at most, running or waiting
            (default ``4 * threads``); beyond it on every replica a call answers ``overloaded``.
        node_home: the home each replica uses on its node (default: ``home``, for one
            node or a home on a shared filesystem). Replicas fetch the artifacts it
            lacks by digest and keep their own audit chain there.
        replica_options: Ray actor options for the replicas (default
            ``{"num_cpus": 1, "scheduling_strategy": "SPREAD"}``).
        **options: the other keyword arguments of :class:`Runtime`, for the driver and every replica.

    Raises:
        ValueError: ``replicas``, ``threads`` or ``max_pending`` is below 1.
        InvalidPolicy: as :class:`Runtime` raises it.

    ``call`` and ``acall`` answer the same :class:`CallResult` as ``Runtime.call``, with
    ``meta["replica"]`` and ``meta["worker_pid"]`` naming who ran the call. ``run``,
    ``arun`` and ``runs`` are those of :class:`Runtime` (code mode): the program runs
    on the driver, journaled in the driver's home, and each nested call on a replica.
    """

    def __init__(
        self,
        replicas: int = 2,
        address: str | None = None,
        home: str | os.PathLike[str] | None = None,
        policy: str | os.PathLike[str] | Policy | None = None,
        *,
        threads: int = 4,
        max_pending: int | None = None,
        node_home: str | os.PathLike[str] | None = None,
        replica_options: dict[str, Any] | None = None,
        **options: Any,
    ) -> None:
        pending = max_pending if max_pending is not None else 4 * threads
        if replicas < 1 or threads < 1 or pending < 1:
            raise ValueError("replicas, threads and max_pending must be at least 1")
        resolved = _settings.home_dir(home)
        chosen = policy if policy is not None else _settings.policy_file()
        super().__init__(resolved, chosen, **options)
        node = Path(node_home) if node_home is not None else None
        replica_runtime = {"home": node or resolved, "policy": chosen, **options}
        try:
            workers = RayWorkers(
                self,
                self._chain,  # the calls the driver answers itself take its own chain
                self._registry.blob_path,
                replicas,
                address,
                threads=threads,
                max_pending=pending,
                node_home=node,
                options=replica_runtime,
                actor_options=replica_options,
            )
        except BaseException:
            super().close()
            raise
        self._run_on(workers)
        self._ray = workers

    def __enter__(self) -> RayRuntime:
        return self

    @property
    def runtime(self) -> Runtime:
        """This RayRuntime itself: the Runtime that answers for the registry, the policy and approvals."""
        return self

    def replicas(self) -> list[dict[str, Any]]:
        """The live replicas: ``replica`` id, ``pid``, Ray ``node_id`` and ``home``, waiting for new ones."""
        return self._ray.replicas()

    def actor(self, replica_id: str) -> Any:
        """The Ray actor handle of a live replica (for operators and tests)."""
        return self._ray.actor(replica_id)

    # -- registry, policy, approvals, audit ---------------------------------------

    def register(
        self,
        wasm_path: str | os.PathLike[str],
        manifest: ManifestSource = None,
        *,
        signature: str | os.PathLike[str] | None = None,
    ) -> ToolInfo:
        """Register in the driver's home (as :meth:`Runtime.register`); replicas fetch it on first call.

        The signature file is kept beside the registry (``signatures/<hex>.sig``) so that
        replicas whose home requires signatures can verify the artifact themselves.
        """
        with self._ray.signatures_lock:
            info = super().register(wasm_path, manifest, signature=signature)
            source = Path(signature) if signature is not None else Path(f"{wasm_path}.sig")
            if source.is_file():
                target = self._ray.signature_path(info.digest)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(source.read_bytes())
        return info

    def gc(self, *, progress: Callable[[str], None] | None = None) -> list[Path]:
        """As :meth:`Runtime.gc`, and the kept signatures (``signatures/``) no registered tool refers to.

        A signature is collected with the last tool of its digest, deprecated or not.
        The files are listed before the tools are read, and a registration writes its
        file only once its tool is registered, so a signature kept before this call
        began is never taken from a tool. (Another process re-registering a digest
        at this very moment may lose the file it rewrites: replicas whose homes
        require signatures then refuse the tool, they never run it unverified.)
        """
        removed = super().gc(progress=progress)
        with self._ray.signatures_lock:
            kept = sorted((self.home / "signatures").glob("*.sig"))
            held = {info.digest.removeprefix("sha256:") for info in self.tools()}
            for path in kept:
                if path.stem not in held:
                    path.unlink(missing_ok=True)
                    removed.append(path)
        return removed

    def explain_everywhere(self, name: str, *, principal: str | None = None) -> dict[str, dict[str, Any]]:
        """``explain`` as each live replica answers it, by replica id (``Decision.to_dict()``).

        The driver resolves ``name`` and each replica decides under its own policy
        for that tool, whether or not its node home holds the tool yet.

        Raises:
            ToolNotFound: the driver's registry has no such tool.
        """
        info = self.tool(name)
        return self._ray.broadcast(lambda actor: actor.explain.remote(info, principal))

    def reload_policy(self) -> bool:
        """Re-read the policy file on the driver and every replica now; whether a new policy took
        effect on the driver (as ``Runtime.reload_policy``). :attr:`policy_digest` names the policy.

        Replicas also re-read a changed file on their own, as every Runtime does.

        Raises:
            RuntimeError: a replica holds a different policy (its node's file differs).
        """
        changed = super().reload_policy()
        expected = policy_digest(self)
        found = self._ray.broadcast(lambda actor: actor.reload_policy.remote())
        differ = sorted(replica for replica, digest in found.items() if digest != expected)
        if differ:
            raise RuntimeError(f"replicas {', '.join(differ)} hold a different policy than the driver")
        return changed

    @property
    def policy_digest(self) -> str:
        """The digest (``sha256:...``) of the policy the driver holds, which every replica's must match."""
        return policy_digest(self)

    def verify_audit(self) -> list[dict[str, Any]]:
        """Verify every audit chain of the deployment: the driver's and each replica home's, once each.

        Returns:
            One entry per chain: ``node_id`` (None for the driver), ``home``, ``ok``, ``rows``, ``problem``.
        """
        check = self.audit.verify()
        driver: dict[str, Any] = {"node_id": None, "home": str(self.home), "ok": check.ok}
        driver.update(rows=check.rows, problem=check.problem)
        return self._ray.replica_chains(driver)


class RayWorkers(Workers):
    """The replica actors of a :class:`RayRuntime` and the router in front of them."""

    def __init__(
        self,
        driver: Runtime,
        local: Callable[[Call], CallResult],
        blob_path: Callable[[str], Path],
        replicas: int,
        address: str | None,
        *,
        threads: int,
        max_pending: int,
        node_home: Path | None,
        options: dict[str, Any],
        actor_options: dict[str, Any] | None,
    ) -> None:
        self._driver = driver
        self._local = local
        self._blob_path = blob_path
        self._recorder = AuditRecorder(driver.audit)
        self._max_pending = max_pending
        self._threads = threads
        self._node_home = node_home
        self._options = options
        self._actor_options = actor_options or {"num_cpus": 1, "scheduling_strategy": "SPREAD"}
        self._owns_ray = not ray.is_initialized()
        if self._owns_ray:
            with keep_trap_handlers():
                if address is None:
                    ray.init(include_dashboard=False)
                else:
                    ray.init(address=address)
        self._actor_class: Any = ray.remote(Replica)
        self._lock = threading.Lock()
        self.signatures_lock = threading.Lock()  # a registration's signature is never collected before it is kept
        self._closed = False
        self._blobs: dict[str, Any] = {}
        self._mean_ms = 10.0
        self._slots = [self._start(f"replica-{index}") for index in range(replicas)]
        try:
            ray.get([slot.ready for slot in self._slots], timeout=START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    # -- lifecycle -----------------------------------------------------------

    def _start(self, replica_id: str) -> _Slot:
        options = {"max_concurrency": self._threads, "max_restarts": 0, **self._actor_options}
        actor = self._actor_class.options(**options).remote(self._options, replica_id, self._threads)
        ready: Any = actor.ready
        return _Slot(replica_id, actor, ready.remote(), lane_ref=actor.open_lane.remote())

    def close(self) -> None:
        """Let the replicas finish their calls, then stop them (and Ray, if this started it). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            slots = [slot for slot in self._slots if slot.alive]
        for slot in slots:
            if slot.lane is not None:
                slot.lane.close()
        closing = [slot.actor.close.remote() for slot in slots]
        try:
            ray.get(closing, timeout=CLOSE_TIMEOUT_S)
        except RayError:
            logger.warning("a replica did not close cleanly")
        for slot in slots:
            ray.kill(slot.actor)
        if self._owns_ray:
            with keep_trap_handlers():
                ray.shutdown()

    def replicas(self) -> list[dict[str, Any]]:
        """The live replicas: ``replica`` id, ``pid``, Ray ``node_id`` and ``home``, waiting for new ones."""
        with self._lock:
            refs = [slot.ready for slot in self._slots if slot.alive]
        return list(ray.get(refs, timeout=START_TIMEOUT_S))

    def actor(self, replica_id: str) -> Any:
        """The Ray actor handle of a live replica (for operators and tests)."""
        with self._lock:
            for slot in self._slots:
                if slot.alive and slot.replica_id == replica_id:
                    return slot.actor
        raise KeyError(f"no live replica {replica_id!r}")

    def broadcast(self, send: Any) -> dict[str, Any]:
        """Each live replica's answer to ``send(actor)``, by replica id."""
        with self._lock:
            slots = [slot for slot in self._slots if slot.alive]
        answers = ray.get([send(slot.actor) for slot in slots])
        return {slot.replica_id: answer for slot, answer in zip(slots, answers, strict=True)}

    def replica_chains(self, driver: dict[str, Any]) -> list[dict[str, Any]]:
        """``driver``'s chain and each replica home's other than the driver's, verified once each."""
        home = driver["home"]
        chains = {("driver", home): driver}
        with self._lock:
            slots = [slot for slot in self._slots if slot.alive]
        for slot in slots:
            about = ray.get(slot.ready)
            key = (about["node_id"], about["home"])
            if about["home"] != home and key not in chains:
                chains[key] = {"node_id": about["node_id"], **ray.get(slot.actor.verify_audit.remote())}
        return list(chains.values())

    def signature_path(self, digest: str) -> Path:
        """Where the driver keeps the signature of the artifact ``digest`` for the replicas."""
        return self._driver.home / "signatures" / f"{digest.removeprefix('sha256:')}.sig"

    # -- calls ------------------------------------------------------------------

    def send(self, call: Call) -> CallResult:
        """Run ``call`` on a replica (or here, for the calls the driver answers itself)."""
        return self._call_with(
            call.call_id or uuid.uuid4().hex, call.tool, call.input, call.principal, RUN_CONTEXT.get()
        )

    def _call_with(
        self, call_id: str, name: str, input: Any, principal: str | None, run: dict[str, Any] | None = None
    ) -> CallResult:
        booked = self._submit(name, input, principal, call_id, run, lane=True)
        if not isinstance(booked, _Booked):
            return booked()
        try:
            if booked.lane is not None:
                envelope = self._on_lane(booked, booked.lane)
            else:
                envelope = ray.get(booked.ref)
            if envelope is None:  # the replica's home lacks the tool: send the call again with its artifact
                envelope = ray.get(self._with_artifact(booked))
        except (RayError, LaneLost, LaneRefused) as exc:
            return self._failed(booked, exc)
        return self._settle(booked, envelope)

    def _on_lane(self, booked: _Booked, lane: Lane) -> Any:
        """The call's envelope through the replica's lane.

        Raises:
            ActorDiedError: the lane broke because the replica died (Ray says so).
            LaneLost: the lane broke with the replica alive, once the request may have been sent (it
                is not used again; a lane that could not be reached at all sends the call through Ray).
            LaneRefused: the replica could not read the request.
        """
        try:
            return lane.call(booked.data, booked.tool, booked.info.digest)
        except LaneLost as lost:
            booked.slot.lane = None  # Ray's path from now on, whatever broke the lane
            lane.close()
            ray.get(booked.slot.actor.ready.remote(), timeout=CLOSE_TIMEOUT_S)  # ActorDiedError when dead
            if not isinstance(lost, LaneUnreachable):
                raise
        # The lane could not be reached and the replica lives: nothing was sent, so the call goes
        # through Ray instead, once, under the same call id.
        booked.lane = None
        booked.ref = booked.slot.call_held.remote(booked.data, booked.tool, booked.info.digest)
        return ray.get(booked.ref)

    async def asend(self, call: Call) -> CallResult:
        """``send`` without blocking the event loop (the wait is on the replica's answer)."""
        import asyncio  # imported here to keep `import glovebox` light

        booked = self._submit(call.tool, call.input, call.principal, call.call_id or uuid.uuid4().hex)
        if not isinstance(booked, _Booked):
            return await asyncio.to_thread(booked)  # answered here: the registry, the audit
        try:
            envelope = await booked.ref
            if envelope is None:  # the replica's home lacks the tool: send the call again with its artifact
                envelope = await self._with_artifact(booked)
        except RayError as exc:
            return await asyncio.to_thread(self._failed, booked, exc)
        return self._settle(booked, envelope)

    def _submit(
        self,
        name: str,
        value: Any,
        principal: str | None,
        call_id: str,
        run: dict[str, Any] | None = None,
        *,
        lane: bool = False,
    ) -> _Booked | Callable[[], CallResult]:
        """Book the call on a replica, or answer how the driver answers it (an unknown tool, overloaded).

        With ``lane``, a replica on this node gets the call through its lane (the caller sends it);
        otherwise it is sent through Ray here."""
        if not isinstance(name, str):
            raise TypeError(f"tool name must be a str, not {type(name).__name__}")
        if principal is not None and not isinstance(principal, str):
            raise TypeError(f"principal must be a str or None, not {type(principal).__name__}")
        if self._closed:
            raise ValueError("this RayRuntime is closed")
        here = Call(name, value, principal, call_id)
        try:
            info = self._driver.tool(name)
        except (ToolNotFound, ValueError):  # answered (and audited) here, as any Runtime would
            return functools.partial(self._local, here)
        if info.kind == "mcp-remote":  # no artifact to ship (its descriptor is not wasm): the driver proxies it
            return functools.partial(self._local, here)
        slot = self._choose(info.digest)
        if slot is None:
            return functools.partial(self._recorder.refuse, here, self._overloaded())
        # As JSON text, as a ProcessPool worker gets it: a replica unpickles nothing the caller chose.
        data = _procwire.encode(call_id, name, value, principal, None, run)
        booked = _Booked(slot, None, call_id, name, value, principal, info, data, run=run)
        booked.lane = self._lane(slot) if lane else None
        if booked.lane is None:
            # name@version and the digest stand for the artifact: nothing for Ray to pickle or track per call.
            booked.ref = slot.call_held.remote(data, booked.tool, info.digest)
        return booked

    def _lane(self, slot: _Slot) -> Lane | None:
        """The replica's lane when it runs on this node (asked once per replica), else None."""
        if slot.lane_known:
            return slot.lane
        try:
            about = ray.get(slot.lane_ref, timeout=START_TIMEOUT_S)
        except RayError:
            about = None
        here = ray.get_runtime_context().get_node_id()
        with self._lock:
            if not slot.lane_known:
                if about is not None and about["node_id"] == here and not self._closed:
                    slot.lane = Lane(about["path"], about["token"])
                slot.lane_known = True
            return slot.lane

    def _with_artifact(self, booked: _Booked) -> Any:
        """Send a call again with its tool's artifact, to the replica that answered it lacks the tool."""
        booked.ref = booked.slot.call.remote(booked.data, self._artifact(booked.info))
        return booked.ref

    @property
    def in_flight(self) -> int:
        """Calls booked on the replicas and not answered yet (running there, or in a replica's line)."""
        with self._lock:
            return sum(slot.pending for slot in self._slots if slot.alive)

    @property
    def queued(self) -> int:
        """Always 0: a call finding every replica at ``max_pending`` answers ``overloaded``, it does not wait here."""
        return 0

    def _choose(self, digest: str) -> _Slot | None:
        """The replica for a tool: the first by rendezvous rank with no call in flight, else the
        least loaded below ``max_pending`` (ties in rank order).

        Calls one at a time stay on one replica; calls at once spread over the replicas
        instead of filling one replica's threads under its one GIL while another idles.
        """
        with self._lock:
            live = [slot for slot in self._slots if slot.alive]
            ranked = sorted(live, key=lambda slot: _rank(digest, slot.replica_id))
            chosen = next((slot for slot in ranked if slot.pending == 0), None)
            if chosen is None:
                open_slots = [slot for slot in ranked if slot.pending < self._max_pending]
                chosen = min(open_slots, key=lambda slot: slot.pending, default=None)  # min keeps the first of ties
            if chosen is not None:
                chosen.pending += 1
            return chosen

    def _overloaded(self) -> Overloaded:
        retry_after_ms = max(1, int(self._mean_ms))
        return Overloaded(
            f"every replica is at its bound of {self._max_pending} calls in flight; retry in about {retry_after_ms} ms",
            details={"retry_after_ms": retry_after_ms, "max_pending": self._max_pending},
        )

    def _artifact(self, info: ToolInfo) -> Artifact:
        """What a replica needs to fetch the tool by digest; the bytes are put in the object store once."""
        with self._lock:
            blob = self._blobs.get(info.digest)
        if blob is None:
            blob = ray.put(self._blob_path(info.digest).read_bytes())
            with self._lock:
                blob = self._blobs.setdefault(info.digest, blob)
        signature_file = self.signature_path(info.digest)
        signature = signature_file.read_bytes() if signature_file.is_file() else None
        return Artifact(info.name, info.version, info.digest, info.manifest, [blob], signature)

    # -- answers -------------------------------------------------------------

    def _release(self, booked: _Booked) -> None:
        elapsed_ms = (time.perf_counter() - booked.started) * 1000
        with self._lock:
            booked.slot.pending -= 1
            self._mean_ms = 0.9 * self._mean_ms + 0.1 * elapsed_ms

    def _settle(self, booked: _Booked, envelope: Any) -> CallResult:
        self._release(booked)
        try:
            return CallResult.from_dict(envelope)
        except ValueError:
            logger.exception("unreadable answer to call %s from %s", booked.call_id, booked.slot.replica_id)
            return self._lost(booked)

    def _failed(self, booked: _Booked, exc: Exception) -> CallResult:
        """A call whose replica died or raised: replace a dead replica, answer and audit the call."""
        self._release(booked)
        logger.error("replica %s failed call %s: %s", booked.slot.replica_id, booked.call_id, exc)
        if isinstance(exc, ActorDiedError):
            self._replace(booked.slot)
        return self._lost(booked)

    def _replace(self, slot: _Slot) -> None:
        with self._lock:
            if not slot.alive:
                return
            slot.alive = False
            if self._closed:
                return
            self._slots[self._slots.index(slot)] = self._start(slot.replica_id)

    def _lost(self, booked: _Booked) -> CallResult:
        call = Call(booked.name, booked.value, booked.principal, booked.call_id, started=booked.started)
        return self._recorder.lost(
            call,
            what=f"the replica running this call ({booked.slot.replica_id})",
            where={"replica": booked.slot.replica_id},
            recorded=self._recorded_elsewhere(booked.call_id),
            run=booked.run,
        )

    def _recorded_elsewhere(self, call_id: str) -> bool:
        """Whether a replica home other than the driver's holds the call's audit row."""
        if self._node_home is None:
            return False
        with self._lock:
            slots = [slot for slot in self._slots if slot.alive]
        try:
            return any(ray.get([slot.actor.audited.remote(call_id) for slot in slots], timeout=CLOSE_TIMEOUT_S))
        except RayError:
            return False


@contextlib.contextmanager
def keep_trap_handlers() -> Iterator[None]:
    """Put back, after the block, the handlers of the signals wasmtime turns into guest traps.

    Joining or leaving Ray (``ray.init``, ``ray.shutdown``) replaces the process's handlers
    of SIGSEGV, SIGILL, SIGBUS and SIGFPE; a guest trap in this process would then end it.
    The ``sigaction`` records are saved and restored as opaque bytes (Linux and macOS).
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        saved: dict[int, Any] = {}
        for signum in (signal.SIGSEGV, signal.SIGILL, signal.SIGBUS, signal.SIGFPE):
            record = ctypes.create_string_buffer(512)
            if libc.sigaction(int(signum), None, record) == 0:
                saved[int(signum)] = record
    except (OSError, AttributeError):
        saved = {}
    try:
        yield
    finally:
        for number, record in saved.items():
            libc.sigaction(number, record, None)


def _quiet(method: Any) -> Any:
    """An actor method whose tasks Ray keeps no task events for.

    Task events feed Ray's state API and dashboard (``ray list tasks``); recording them
    cost about 0.4 ms of a tiny call's round trip on a loaded 2-core machine. A call's
    record is its audit row, and its envelope names the replica that ran it.
    """
    return method.options(enable_task_events=False)


def _rank(digest: str, replica_id: str) -> bytes:
    """Rendezvous (highest random weight) order: lowest first, stable for a digest and a replica."""
    return hashlib.blake2b(f"{digest}|{replica_id}".encode(), digest_size=8).digest()
