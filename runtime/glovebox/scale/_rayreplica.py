"""One replica of a Ray deployment: a Runtime in a Ray actor, fed artifacts by digest.

The driver (``glovebox.scale._raycluster``) resolves each call's tool in its own
registry and sends the replica the request with ``name@version`` and the digest
(:meth:`Replica.call_held`): two strings, nothing for Ray to track. A replica whose
home holds that ``name@version`` with that digest (always, when it shares the
driver's home) runs the call at once; one that does not answers None, having run
and recorded nothing, and the driver sends the call again with an :class:`Artifact`
(:meth:`Replica.call`): the digest, the manifest, and a reference to the
artifact's bytes in Ray's object store (wrapped in a list, so Ray hands over the
reference and not the bytes). The replica fetches the bytes, checks their SHA-256
against the digest **before anything else touches them**, and registers them in
its home, which verifies the signature when the home requires one, compiles in a
resource-limited child and keeps the compiled component in the node's cache. Bytes
whose digest does not match are refused: the call answers ``internal_error`` (as
a blob changed on disk does for a ``Runtime``: the registered tool is intact, its
delivery is not), is audited, and nothing is stored or compiled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core._canonical import sha256_digest
from ..core._errors import CallError, InternalError, ToolNotFound
from ..model._manifest import Manifest
from ..model._result import CallResult, ToolInfo
from ..policy import decide
from ..runtime._call import Call
from ..runtime._envelope import RUN_CONTEXT, failure, new_meta
from ..runtime._record import AuditRecorder
from ..runtime._runtime import Runtime
from ._procwire import BadRequest, Request, decode, is_unicode
from ._raylane import LaneServer

__all__ = ["Artifact", "Replica"]

logger = logging.getLogger("glovebox")


@dataclass(frozen=True)
class Artifact:
    """What a replica needs to run a registered tool it may not hold yet."""

    name: str
    version: str
    digest: str
    manifest: Manifest
    #: ``[ObjectRef]`` of the artifact's bytes (a list: Ray leaves nested references unresolved).
    blob: list[Any]
    #: The signature document the driver's home keeps for this digest, if any.
    signature: bytes | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


class Replica:
    """The body of a replica actor: one Runtime on the node's home."""

    def __init__(self, options: dict[str, Any], replica_id: str, threads: int | None = None) -> None:
        self.replica_id = replica_id
        self.runtime = Runtime(**options)
        self._install_lock = threading.Lock()
        #: ``threads`` calls at once, whichever way they came (Ray's actor threads or the lane's).
        self._running = threading.BoundedSemaphore(threads) if threads is not None else contextlib.nullcontext()
        self._lane: LaneServer | None = None
        self._lane_lock = threading.Lock()

    def open_lane(self) -> dict[str, Any]:
        """Listen for calls from a driver on this node (``glovebox.scale._raylane``): ``path``,
        ``token`` and ``node_id`` (for the driver to use only when its node is the same), and
        ``answered``, the calls the lane has answered so far."""
        import ray

        with self._lane_lock:
            if self._lane is None:
                self._lane = LaneServer(self.call_held, BadRequest)
            lane = self._lane
        node = ray.get_runtime_context().get_node_id()
        return {"path": lane.path, "token": lane.token, "node_id": node, "answered": lane.answered}

    def ready(self) -> dict[str, Any]:
        """Who this replica is: pid, Ray node id, home."""
        import ray

        node = ray.get_runtime_context().get_node_id()
        return {"pid": os.getpid(), "node_id": node, "home": str(self.runtime.home), "replica": self.replica_id}

    def call(self, data: bytes, artifact: Artifact) -> Any:
        """Run one call (its request as ``_procwire`` JSON text, never a pickle of the caller's value),
        installing the artifact first when this home lacks it; answer its envelope, with
        ``meta.worker_pid`` and ``meta.replica``."""
        request = _request(data)  # BadRequest: the driver answers the call as failed (a RayError)
        with self._running:
            if not _refused_first(request) and (failure := self._ensure(artifact)) is not None:
                error = self._refused(request.call_id, artifact, request.input, request.principal, failure)
                return self._stamped(error)
            return self._answer(request, artifact.ref)

    def call_held(self, data: bytes, ref: str, digest: str) -> Any:
        """``call`` for a tool this home already holds: ``ref`` (``name@version``) and its digest
        stand for the artifact, so nothing but two strings and the request crosses per call.

        Answers None, having run and recorded nothing, when this home does not hold ``ref``
        with that digest: the driver then sends the :class:`Artifact` through :meth:`call`.
        """
        if not self._holds(ref, digest):
            return None
        request = _request(data)
        with self._running:
            return self._answer(request, ref)

    def _answer(self, request: Request, ref: str) -> Any:
        """Run the call; a nested call of a run is made with its run's context (``meta.run``, from the request)."""
        call_id, value, principal = request.call_id, request.input, request.principal
        token = RUN_CONTEXT.set(request.run) if request.run is not None else None
        try:
            refusal = request.refusal
            if refusal is not None and is_unicode(request.name, principal):  # first, as Runtime.call
                result = AuditRecorder(self.runtime.audit).refuse(Call(ref, None, principal, call_id), refusal)
            else:
                result = self.runtime.send(Call(ref, value, principal, call_id))
        finally:
            if token is not None:
                RUN_CONTEXT.reset(token)
        return self._stamped(result)

    def _stamped(self, result: CallResult) -> Any:
        result.meta["worker_pid"] = os.getpid()
        result.meta["replica"] = self.replica_id
        return result.to_dict()

    def holds(self, artifact: Artifact) -> bool:
        """Whether this replica's home has ``name@version`` with this digest."""
        return self._holds(artifact.ref, artifact.digest)

    def _holds(self, ref: str, digest: str) -> bool:
        try:
            return self.runtime.tool(ref).digest == digest
        except ToolNotFound:
            return False

    def _ensure(self, artifact: Artifact) -> CallError | None:
        """Make the artifact present in this home; the error a call answers when it cannot be."""
        if self.holds(artifact):
            return None
        with self._install_lock:
            if self.holds(artifact):
                return None
            try:
                self._install(artifact)
            except CallError as error:
                return error
            except Exception as exc:  # a registration error, a lost object: the detail goes to the log
                logger.error("replica %s cannot install %s: %s", self.replica_id, artifact.digest, exc)
                return InternalError("the tool's artifact could not be installed on this replica")
        return None

    def _install(self, artifact: Artifact) -> None:
        import ray

        data = ray.get(artifact.blob[0])
        if not isinstance(data, bytes) or sha256_digest(data) != artifact.digest:
            logger.error("replica %s was handed bytes that are not artifact %s", self.replica_id, artifact.digest)
            raise InternalError("the tool's artifact failed verification; it will not run")
        with tempfile.TemporaryDirectory(prefix="glovebox-fetch-") as scratch:
            path = Path(scratch) / "tool.wasm"
            path.write_bytes(data)
            signature = None
            if artifact.signature is not None:
                signature = Path(scratch) / "tool.wasm.sig"
                signature.write_bytes(artifact.signature)
            self._drop_other(artifact)
            self.runtime.register(path, artifact.manifest, signature=signature)

    def _drop_other(self, artifact: Artifact) -> None:
        """Remove another artifact this home holds under the same ``name@version`` (never this one:
        a replica sharing the home may have just installed it and be running it)."""
        try:
            if self.runtime.tool(artifact.ref).digest != artifact.digest:
                self.runtime.remove(artifact.ref)  # name@version
        except ToolNotFound:
            pass

    def _refused(
        self, call_id: str, artifact: Artifact, value: Any, principal: str | None, error: CallError
    ) -> CallResult:
        meta = new_meta(artifact.name, principal, call_id)
        meta.update(version=artifact.version, digest=artifact.digest)
        return AuditRecorder(self.runtime.audit).elsewhere(failure(error, meta), value)

    def reload_policy(self) -> str:
        """Re-read the policy file; answer the digest of the policy now in force."""
        self.runtime.reload_policy()
        return policy_digest(self.runtime)

    def policy_digest(self) -> str:
        return policy_digest(self.runtime)

    def explain(self, info: ToolInfo, principal: str | None) -> dict[str, Any]:
        """The decision of this replica's policy for the tool the driver resolved.

        The decision needs the manifest only, not the artifact, so a replica whose
        home has not received the tool yet answers it too.
        """
        return decide(self.runtime.policy, principal or "anonymous", info).to_dict()

    def audited(self, call_id: str) -> bool:
        """Whether this replica's home has the audit row of ``call_id``."""
        return self.runtime.audit.find(call_id) is not None

    def verify_audit(self) -> dict[str, Any]:
        check = self.runtime.audit.verify()
        return {"home": str(self.runtime.home), "ok": check.ok, "rows": check.rows, "problem": check.problem}

    def close(self) -> None:
        with self._lane_lock:
            if self._lane is not None:
                self._lane.close()
        self.runtime.close()


def _request(data: bytes) -> Request:
    """The call in ``data``.

    Raises:
        BadRequest: ``data`` is not a call (the driver answers the call as failed).
    """
    request = decode(data)
    if request is None:
        raise BadRequest("a stop message is not a call")
    return request


def _refused_first(request: Request) -> bool:
    """Whether the input is refused before anything else is looked at, as ``Runtime.call`` refuses it."""
    return request.refusal is not None and is_unicode(request.name, request.principal)


def policy_digest(runtime: Runtime) -> str:
    """``sha256:`` of the policy in force, as JSON: equal digests, equal decisions."""
    text = runtime.policy.model_dump_json()
    return sha256_digest(text)
