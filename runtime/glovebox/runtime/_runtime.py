"""The Runtime facade: register tools, list them, call them."""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import logging
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..audit._log import AuditLog
from ..core import _settings
from ..core._carried import carried_context
from ..core._errors import Overloaded
from ..engine._settings import EngineSettings
from ..guards import BreakerBoard, BreakerState
from ..model._grants import GrantsSource, load_grants
from ..model._result import CallResult, ToolInfo
from ..policy import Approval, Decision, Policy
from ..registry._compiled import CompiledCache
from ..registry._keyring import Keyring
from ..registry._registration import ManifestSource, Registrar, resolve_manifest
from ..registry._registry import Registry
from ..runs._result import RunResult
from ..sandbox._compute import DEFAULT_MAX_RUNNING, ComputeSlots
from ..sandbox._sandbox import Sandbox
from ..telemetry._tracing import TracedCall, Tracing
from . import _coderun, handlers
from ._admission import DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_QUEUED, Admission, mapping_bound
from ._call import Call, Handler, compose
from ._gate import PolicyGate
from ._record import AuditRecorder
from ._runenv import RuntimeRunEnvironment
from ._wasmparts import WasmParts
from .executors import Executor, Executors, McpRemoteExecutor, WasmExecutor, Workers
from .executors._program import ProgramExecutor
from .handlers._resolve import not_found_message
from .handlers._validate import SchemaCache

if TYPE_CHECKING:
    import httpx

    from ._callthreads import CallThreads

__all__ = ["Runtime", "load_grants", "resolve_manifest"]

logger = logging.getLogger("glovebox")
#: What ``explain`` says when no policy is loaded: the built-in behaviour.
NO_POLICY_REASON = (
    "no policy is loaded (glovebox --policy FILE, or GLOVEBOX_POLICY): a tool without required scopes runs,"
    " granted only the Runtime's grants (GLOVEBOX_GRANTS; none by default); a tool with required scopes is refused"
)


class Runtime:
    """Registers tools and runs each call in a fresh, isolated wasm instance.

    Args:
        home: where artifacts, caches, the index, approvals and the audit log
            live (default: ``GLOVEBOX_HOME``, else a per-user data directory).
        policy: a policy file (reloaded when it changes) or a ``Policy``; else
            ``GLOVEBOX_POLICY``. With neither, tools without required scopes
            run, tools that require scopes are refused, and nothing is granted
            beyond ``grants``.
        require_signatures: refuse unsigned artifacts at registration
            (default: the ``GLOVEBOX_REQUIRE_SIGNATURES`` environment variable).
        grants: what every call is granted when no policy is configured (with a
            policy, the policy's grants govern): a :class:`Grants`, a dict, or a
            JSON/TOML grants file; default ``GLOVEBOX_GRANTS`` (a file path), else nothing.
        transport: an ``httpx`` transport for the HTTP capability (tests use
            ``httpx.MockTransport``); default: real connections.
        engine: the wasmtime engine's settings (instance pool, memory slots,
            guard regions); Runtimes with equal settings share one engine. It
            is created on the first call or registration, not here. Default:
            ``EngineSettings()``, its pool raised to hold ``max_in_flight`` instances.
        max_in_flight: calls this Runtime runs at once, from every door (``call``
            from any thread, ``acall``, the servers); a call waiting on an
            upstream counts. Default 10,000.
        max_queued: calls that may wait for a slot beyond ``max_in_flight``
            (default 10,000); beyond both a call answers ``overloaded`` at once.
        max_running: admitted calls that run Python or wasm at once (default
            two per core); a call gives its compute slot up while it waits on
            the network and takes it back in arrival order (see ``glovebox.sandbox._compute``).
        executor: what runs each admitted call's tool (see ``glovebox.runtime.executors``);
            default: a fresh wasm sandbox in this process (and a remote MCP server's
            tool proxied to it). Tests of everything around the sandbox pass a
            ``FakeExecutor``: every call still goes through the whole chain.
        tracer_provider: the OpenTelemetry ``TracerProvider`` whose tracer makes
            the call spans; default: the global provider, looked up per call, so
            one configured later takes effect (with none configured, or without
            opentelemetry, no span is made). See ``glovebox.telemetry._tracing``.

    Raises:
        InvalidPolicy: the policy file given at construction cannot be used
            (nothing is created in the home then).
        NotADirectoryError: ``home`` is a file or lies under one.

    Use it as a context manager, or call ``close()`` when done.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        policy: str | os.PathLike[str] | Policy | None = None,
        *,
        require_signatures: bool | None = None,
        grants: GrantsSource = None,
        transport: httpx.BaseTransport | None = None,
        engine: EngineSettings | None = None,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        max_queued: int = DEFAULT_MAX_QUEUED,
        tracer_provider: Any = None,
        max_running: int = DEFAULT_MAX_RUNNING,
        executor: Executor | None = None,
    ):
        if engine is not None and not isinstance(engine, EngineSettings):
            raise TypeError(f"engine must be an EngineSettings, not {type(engine).__name__}")
        self._admission = Admission(max_in_flight, max_queued, maps=mapping_bound())
        self._compute = ComputeSlots(max_running)
        self._tracing = Tracing(tracer_provider)
        self.home = _settings.check_home(_settings.home_dir(home))
        if policy is None:
            policy = _settings.policy_file()
        # The inputs are checked before anything is written in the home.
        self._grants = load_grants(grants if grants is not None else _settings.grants_file())
        self._gate = PolicyGate(self.home, policy)
        self.policy_path = self._gate.path
        self._policy_given = policy is not None
        self._audit = AuditLog(self.home)
        self._registry = Registry(self.home)
        bound = self._admission.max_in_flight
        self.engine_settings = engine if engine is not None else EngineSettings().sized_for(bound)
        self._wasm_parts: WasmParts | None = None
        self._wasm_lock = threading.Lock()
        self.trusted_keys_dir = _settings.trusted_keys_dir(self.home)
        self.require_signatures = (
            require_signatures if require_signatures is not None else _settings.require_signatures()
        )
        self._board: BreakerBoard | None = None
        self._lock = threading.Lock()
        self._threads: CallThreads | None = None
        self._runs: _coderun.Runs | None = None
        self._closed = False
        self._recorder = AuditRecorder(self._audit)
        self._workers: Workers | None = None  # where calls go instead of the chain (ProcessPool, RayRuntime)
        self._wasm_executor = WasmExecutor(self.home, self._wasm, self._gate, self._breakers, transport)
        remote = McpRemoteExecutor(self._registry, self._breakers)
        program = ProgramExecutor(self._registry, lambda: self.runs, lambda: self.policy)  # saved programs
        by_kind = {} if executor else {"mcp-remote": remote, "program": program}
        self._executors = Executors(executor or self._wasm_executor, by_kind)
        self._build_chain(self._executors)

    # -- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the worker pool, the engine and the database handles. Idempotent.

        The engine's epoch ticker stops when its last Runtime closes.
        """
        with self._wasm_lock:
            if self._closed:
                return
            self._closed = True
        if self._workers is not None:
            self._workers.close()
        with self._lock:
            threads = self._threads
        if threads is not None:
            threads.shutdown(wait=True)
        self._executors.close()
        if self._wasm_parts is not None:
            self._wasm_parts.release()
        self._registry.close()
        self._audit.close()
        self._gate.close()
        if self._board is not None:
            self._board.close()
        if self._runs is not None:
            self._runs.close()

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("this Runtime is closed")

    def _wasm(self) -> WasmParts:
        """The engine and what runs on it, made on first need."""
        parts = self._wasm_parts
        if parts is None:
            with self._wasm_lock:
                self._check_open()
                if self._wasm_parts is None:
                    self._wasm_parts = WasmParts(
                        self.engine_settings, self._registry, self.home, self.trusted_keys_dir, self.require_signatures
                    )
                parts = self._wasm_parts
        return parts

    def _breakers(self) -> BreakerBoard:
        """The circuit breakers of this home, opened on first need."""
        board = self._board
        if board is None:
            with self._lock:
                self._check_open()
                if self._board is None:
                    self._board = BreakerBoard(self.home)
                board = self._board
        return board

    @property
    def _sandbox(self) -> Sandbox:
        return self._wasm().sandbox

    @property
    def _compiled(self) -> CompiledCache:
        return self._wasm().compiled

    def _component(self, info: ToolInfo) -> Any:
        """The compiled component of ``info`` (for the benchmarks' bare-sandbox figures)."""
        return self._compiled.get(info.digest)

    @property
    def _registrar(self) -> Registrar:
        return self._wasm().registrar

    # -- registry ----------------------------------------------------------

    def register(
        self,
        wasm_path: str | os.PathLike[str],
        manifest: ManifestSource = None,
        *,
        signature: str | os.PathLike[str] | None = None,
    ) -> ToolInfo:
        """Validate, compile and store a component with its manifest; return what was registered.

        The artifact is compiled in a resource-limited child process, checked
        against the glovebox world and instantiated once under its limits
        before anything is stored. A signature (``signature=``, else
        ``TOOL.wasm.sig`` beside the artifact) is verified against the trusted
        keys; with ``require_signatures`` an unsigned artifact is refused.

        ``wasm_path`` may also be an ``oci://`` reference or an OCI image layout
        directory: see :meth:`register_oci` (with its defaults).

        Raises:
            InvalidArtifact: the file is not a component of the glovebox world.
            InvalidManifest: the manifest is malformed or asks for too much.
            SignatureError: the signature is missing, tampered with or untrusted.
        """
        self._check_open()
        from . import _oci  # httpx and the OCI code only when asked

        if _oci.is_oci_source(wasm_path):
            if manifest is not None or signature is not None:
                raise ValueError("an oci:// artifact carries its manifest and signatures: give neither")
            return self.register_oci(wasm_path)
        return self._registrar.register(Path(wasm_path), manifest, signature)

    def register_oci(
        self,
        source: str | os.PathLike[str],
        *,
        keys: list[str] | None = None,
        insecure: bool = False,
        accept_widening: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> ToolInfo:
        """Register a tool from a registry (``oci://HOST/REPO:TAG`` or ``...@sha256:HEX``) or an OCI layout directory.

        A tag is resolved once and everything is then read by that digest (the manifest, the
        component and the glovebox manifest layers, each hashed and size-capped). A signature is
        checked first, before any layer is fetched or compiled, when the policy's ``signatures``
        cover the source, ``require_signatures`` is on, or ``keys`` are given. Registering a tag
        again re-resolves it: the same digest changes nothing; a new digest is a new version, and
        one that may reach more than the version before it (from the same repository) is refused
        unless ``accept_widening``. Where each tool came from is kept in ``HOME/oci/``.

        Args:
            source: the reference, or a directory written by :meth:`pull`.
            keys: cosign public keys (PEM files), any one of which must have signed the artifact.
            insecure: plain http to a registry that is not on a loopback address.
            accept_widening: let a new version reach more than the previous one.
            transport: an ``httpx`` transport for the registry (default: real connections).

        Raises:
            SignatureRefused: unsigned, or no valid signature of this digest by a trusted key.
            RegistryError: the registry is unreachable, refuses, or redirects to another host.
            InvalidArtifact: content that does not match its digest, its media type or the size cap.
            WideningRefused: a new version may reach more and ``accept_widening`` is not set.
        """
        self._check_open()
        from . import _oci

        return _oci.register_oci(
            self, source, keys=keys, insecure=insecure, accept_widening=accept_widening, transport=transport
        )

    def verify_oci(
        self,
        source: str | os.PathLike[str],
        *,
        keys: list[str] | None = None,
        insecure: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> tuple[str, str]:
        """Check the cosign signature of an ``oci://`` artifact (or an OCI layout) without registering it.

        The keys are the policy's ``signatures`` entries that cover the source and ``keys``;
        every covering entry must be satisfied, as :meth:`register_oci` requires.

        Returns:
            The pinned reference (its tag resolved once) and the signer, ``cosign:KEY_ID``.

        Raises:
            SignatureRefused: no key to check by, unsigned, or no valid signature of this digest.
        """
        self._check_open()
        from . import _oci

        return _oci.verify_oci(self, source, keys=keys, insecure=insecure, transport=transport)

    def push(
        self,
        ref: str,
        target: str,
        *,
        key: str | os.PathLike[str] | None = None,
        insecure: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> str:
        """Publish the registered tool ``ref`` (NAME or NAME@VERSION) at ``target`` (``oci://HOST/REPO:TAG``).

        The artifact is a CNCF Wasm OCI artifact (config ``application/vnd.wasm.config.v0+json``, one
        ``application/wasm`` layer) with the tool's manifest as a second layer
        (``application/vnd.glovebox.manifest.v1+json``). With ``key`` (an ECDSA P-256 PEM private
        key), a cosign signature of the pushed digest is stored beside it.

        Returns:
            The pinned reference, ``oci://HOST/REPO:TAG@sha256:HEX``.

        Raises:
            ToolNotFound: no such tool.
            RegistryError: the registry is unreachable or refuses.
        """
        self._check_open()
        from . import _oci

        return _oci.push(self, ref, target, key=key, insecure=insecure, transport=transport)

    def pull(
        self,
        source: str,
        to: str | os.PathLike[str],
        *,
        insecure: bool = False,
        transport: httpx.BaseTransport | None = None,
    ) -> str:
        """Copy an artifact and its signatures from a registry into an OCI layout directory ``to``.

        Nothing is registered: take ``to`` to a host without registry access and
        :meth:`register` it there (its signatures are checked there as from a registry).

        Returns:
            The pinned reference the layout holds.
        """
        self._check_open()
        from . import _oci

        return _oci.pull(source, to, insecure=insecure, transport=transport)

    def register_all(
        self,
        wasm_path: str | os.PathLike[str],
        manifest: ManifestSource = None,
        *,
        signature: str | os.PathLike[str] | None = None,
    ) -> list[ToolInfo]:
        """:meth:`register`, answering every tool it made.

        A component that exports glovebox's ``call`` is one tool. Any other
        component is one tool per exported function, named
        ``<name>-<function>``, with schemas from its WIT types (see the guide's
        "Bring any component"); :meth:`register` answers the first of them.

        Raises:
            InvalidArtifact: the file is not a component, or an export has no JSON form (a resource).
            InvalidManifest: the manifest is malformed or asks for too much.
            SignatureError: the signature is missing, tampered with or untrusted.
        """
        self._check_open()
        return self._registrar.register_all(Path(wasm_path), manifest, signature)

    def verify(
        self,
        wasm_path: str | os.PathLike[str],
        *,
        manifest: ManifestSource = None,
        signature: str | os.PathLike[str] | None = None,
    ) -> str:
        """Check an artifact's signature against its manifest and this home's trusted keys.

        Nothing is registered; see :meth:`Keyring.verify`, which this calls.

        Returns:
            Who signed: ``NAME:KEY_ID``, as ``ToolInfo.signer`` would name it.

        Raises:
            SignatureError: the signature is missing, tampered with or untrusted.
        """
        self._check_open()
        return Keyring(self.home).verify(wasm_path, manifest=manifest, signature=signature)

    def trust_key(self, public_key_path: str | os.PathLike[str]) -> str:
        """Trust signatures made with an Ed25519 public key (PEM); return the signer ``NAME:KEY_ID``.

        Raises:
            SignatureError: the file is not an Ed25519 public key.
        """
        self._check_open()
        return Keyring(self.home).trust(public_key_path)

    def trusted_keys(self) -> list[str]:
        """The signers this home trusts, ``NAME:KEY_ID``, sorted by name."""
        self._check_open()
        return Keyring(self.home).keys()

    def tools(
        self, pattern: str | None = None, *, include_deprecated: bool = True, signed: bool | None = None
    ) -> list[ToolInfo]:
        """Registered tool versions, sorted by name, newest first.

        Args:
            pattern: an fnmatch pattern over tool names (``"text-*"``).
            include_deprecated: include deprecated versions.
            signed: True for signed versions only, False for unsigned only.
        """
        self._check_open()
        return self._registry.entries(pattern, include_deprecated=include_deprecated, signed=signed)

    def tool(self, ref: str) -> ToolInfo:
        """One tool: ``name@version``, or the newest non-deprecated version of ``name``.

        Raises:
            ToolNotFound: nothing matches.
        """
        self._check_open()
        return self._registry.resolve(ref)

    def visible_tools(self, principal: str | None = None) -> list[ToolInfo]:
        """The tools ``principal`` may see: the newest non-deprecated version of each
        name whose policy decision is not ``block`` and whose required scopes it holds.

        The servers list exactly these; a tool that needs approval is visible
        (calling it answers ``approval_required``).
        """
        self._check_open()
        who = principal or "anonymous"
        newest: dict[str, ToolInfo] = {}
        for info in self._registry.entries(include_deprecated=False):
            newest.setdefault(info.name, info)  # entries() lists each name newest first
        visible = []
        for info in newest.values():
            decision = self._gate.decide(info, who)
            if decision.action != "block" and not decision.missing_scopes:
                visible.append(info)
        return visible

    @property
    def is_closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @property
    def registry(self) -> Registry:
        """The home's registry: its index of tool versions, artifacts and descriptors.

        For code built on glovebox that writes many versions in one transaction, as the
        importers do; ``tools``, ``tool``, ``remove`` and ``deprecate`` are its everyday face.

        Raises:
            ValueError: the Runtime is closed.
        """
        self._check_open()
        return self._registry

    @property
    def registrar(self) -> Registrar:
        """What registers artifacts on this Runtime's engine (made on first need); see :attr:`registry`.

        Raises:
            ValueError: the Runtime is closed.
        """
        self._check_open()
        return self._registrar

    @property
    def live_instances(self) -> int:
        """Sandbox instances running right now (for metrics); 0 before the engine exists."""
        parts = self._wasm_parts
        return parts.sandbox.live_instances if parts is not None else 0

    def remove(self, ref: str, *, all_versions: bool = False) -> list[ToolInfo]:
        """Remove ``name@version``; running Runtimes stop seeing it.

        A bare ``name`` names every version, so it needs ``all_versions=True``.

        Raises:
            ToolNotFound: nothing matches.
            ValueError: ``ref`` is a bare name and ``all_versions`` is False.
        """
        self._check_open()
        if "@" not in ref and not all_versions:
            raise ValueError(f"{ref!r} names every version; give NAME@VERSION or pass all_versions=True")
        return self._registry.remove(ref)

    def gc(self, *, progress: Callable[[str], None] | None = None) -> list[Path]:
        """Delete what interrupted registrations and removals left in this home; return the paths.

        Staging folders and partial files of registrations or rebuilds whose
        process died (skipped while any process is staging, so a live
        registration is never touched), and blobs and compiled components no
        registered tool refers to. Safe to run at any time, from any process.
        ``progress`` is told each step (what is checked, how much goes), for a terminal.
        """
        self._check_open()
        return self._registry.gc(progress)

    def deprecate(self, ref: str, message: str = "") -> list[ToolInfo]:
        """Mark ``name@version`` (or every version of ``name``) deprecated.

        A deprecated version still runs when asked for by ``name@version``;
        a bare ``name`` resolves to the newest version that is not deprecated.
        Calls to a deprecated version carry ``meta["deprecated"]``.
        """
        self._check_open()
        return self._registry.deprecate(ref, message)

    # -- policy, approvals, audit -------------------------------------------

    @property
    def policy(self) -> Policy:
        """The policy in force (re-read first if its file changed)."""
        return self._gate.current()

    @property
    def policy_configured(self) -> bool:
        """Whether a policy (a file or a ``Policy``) was given, rather than the no-policy default."""
        return self._policy_given

    @property
    def policy_error(self) -> str | None:
        """Why the last reload failed (the previous policy stays in force), or None."""
        return self._gate.error

    def reload_policy(self) -> bool:
        """Re-read the policy file now; return whether a new policy took effect."""
        return self._gate.reload()

    def explain(self, name: str, *, principal: str | None = None) -> Decision:
        """What the policy decides for ``principal`` calling tool ``name``, and why.

        Without a policy the reason says so, and what happens then: a tool
        without required scopes runs with the Runtime's ``grants``; one with
        required scopes is refused.
        """
        self._check_open()
        decision = self._gate.decide(self._registry.resolve(name), principal or "anonymous")
        if self._policy_given:
            return decision
        refusal = decision.reason[:1] if decision.missing_scopes else ()
        return dataclasses.replace(decision, reason=(*refusal, NO_POLICY_REASON))

    def approve(self, approval_id: str, *, principal: str) -> Approval:
        """Approve a pending ``approval_required`` call on behalf of ``principal``.

        Raises:
            PermissionDenied: ``principal`` lacks the policy's approver scope,
                asked to approve its own request, or no policy is loaded.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        self._check_open()
        if not isinstance(principal, str) or not principal:
            raise TypeError("principal must be a non-empty str")
        return self._gate.approve(approval_id, principal)

    def deny(self, approval_id: str, *, principal: str, reason: str) -> Approval:
        """Deny a pending ``approval_required`` call on behalf of ``principal``, saying why.

        Until the request expires, the caller's call with that input is answered
        ``permission_denied`` with ``reason`` (``details.reason``, ``details.denied_by``).

        Raises:
            PermissionDenied: ``principal`` lacks the policy's approver scope, or
                asked to deny its own request.
            ValueError: the id is unknown, expired, or not pending any more.
        """
        self._check_open()
        if not isinstance(principal, str) or not principal:
            raise TypeError("principal must be a non-empty str")
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("a denial needs a reason (it is what the caller is told)")
        return self._gate.deny(approval_id, principal, reason)

    def pending_approvals(self, *, offset: int = 0, limit: int | None = None) -> list[Approval]:
        """Approval requests waiting for an approver, oldest first: ``limit`` (all when None) from ``offset``."""
        self._check_open()
        return self._gate.approvals.pending(offset=offset, limit=limit)

    def breakers(self) -> list[BreakerState]:
        """The circuit breakers of this home that are open, half-open, or closed with failures counted.

        Shared by every Runtime on the home, in any process (see ``glovebox.guards``).
        """
        self._check_open()
        if self._board is None and not (self.home / "guards.sqlite").exists():
            return []  # no breaker was ever used on this home: nothing to open
        return self._breakers().states()

    def reset_breakers(self, *, tool: str | None = None, host: str | None = None) -> int:
        """Close circuit breakers by hand: ``tool``'s, ``host``'s, or every one; return how many were not closed.

        Raises:
            ValueError: both ``tool`` and ``host`` are given.
        """
        self._check_open()
        return self._breakers().reset(tool=tool, host=host)

    @property
    def audit(self) -> AuditLog:
        """The audit log of this home."""
        return self._audit

    # -- runs (code mode: glovebox.runtime._coderun) ---------------------------

    def run(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """Run a program that calls tools: ``export default async function (input, tools) { ... }``.

        The program (TypeScript, or JavaScript: ``lang="js"``, or Python:
        ``lang="py"``, a module defining ``async def main(input, tools)``) runs in
        a fresh sandbox of its code runner (QuickJS-NG, or CPython); each ``await tools.call(name, input)`` is a
        full call of ``principal`` (its own policy decision, quota, validation,
        sandbox and audit row), journaled in the home before the program sees
        its result, so ``runs.resume(run_id)`` continues a paused or crashed run
        without running a completed call again. Never raises for a failed run.

        Raises:
            TypeError: ``code`` is not a str, or ``principal`` neither a str nor None.
            BuildError: the program does not compile (esbuild's or Python's message, with line and column).
            InvalidInput: ``input`` breaks the JSON rules.
            ValueError: the Runtime is closed, or ``lang`` is none of ``ts``, ``js``, ``py``.
        """
        return self.runs.start(code, input=input, principal=principal, lang=lang)

    async def arun(self, code: str, *, input: Any = None, principal: str | None = None, lang: str = "ts") -> RunResult:
        """``run`` without blocking the event loop."""
        return await _coderun.arun(self.runs, code, input=input, principal=principal, lang=lang)

    @property
    def runs(self) -> _coderun.Runs:
        """The runs of this home: ``list``, ``show``, ``journal``, ``resume``, ``cancel``, ``collect``."""
        runs = self._runs
        if runs is None:
            with self._lock:
                self._check_open()
                if self._runs is None:
                    self._runs = _coderun.Runs(RuntimeRunEnvironment(self, not_found_message))
                runs = self._runs
        return runs

    # -- calls ---------------------------------------------------------------

    def call(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """Run tool ``name`` (or ``name@version``) on the JSON value ``input``.

        Never raises for a failed call: the failure is in the result's ``error``.
        The input is held to the JSON rules of ``glovebox.core._jsonlimits`` before
        anything else happens (``invalid_input``); a tool name or principal that
        is not valid Unicode is refused the same way, with its lone surrogates
        escaped in ``meta`` and the audit record. A tool that is not registered
        answers ``tool_not_found``, whose message names only the tools that
        ``principal`` may see. The call first takes one of the Runtime's
        ``max_in_flight`` slots, waiting in line (at most ``max_queued`` wait)
        when none is free; with the line full it answers ``overloaded`` at once.

        Raises:
            TypeError: ``name`` is not a str, or ``principal`` is neither a str nor None (misuse).
            ValueError: the Runtime is closed.
        """
        return self.send(Call(name, input, principal))

    def send(self, call: Call) -> CallResult:
        """Run a prepared :class:`~glovebox.runtime._call.Call`; as :meth:`call`, under ``call.call_id``
        when it is set (a ProcessPool worker's call, whose id the pool chose), and with the call's
        ``glovebox.call`` span appended to ``call.spans`` when that is a list.

        Raises:
            TypeError: the call's tool name is not a str, or its principal neither a str nor None.
            ValueError: the Runtime is closed.
        """
        self._check_open()
        _check_name(call.tool)
        _check_principal(call.principal)
        if self._workers is not None:
            return self._workers.send(call)
        return self._chain(call)

    def _run_on(self, workers: Workers) -> None:
        """Send every call to ``workers`` from now on (the constructors of ProcessPool and RayRuntime)."""
        with self._lock:
            if self._runs is not None or self._workers is not None:
                raise ValueError("this Runtime already runs calls: choose its workers when it is made")
            self._workers = workers

    async def acall(self, name: str, input: Any, *, principal: str | None = None) -> CallResult:
        """``call`` for a coroutine: admitted, then run on a thread of its own.

        A call waiting for a slot holds no thread; an admitted call runs on a
        pool of up to ``max_in_flight`` threads, so calls waiting on upstreams
        are not capped by the CPU count. A refused call answers ``overloaded``.
        """
        self._check_open()
        _check_name(name)
        _check_principal(principal)
        if self._workers is not None:
            return await self._workers.asend(Call(name, input, principal))
        with TracedCall(self._tracing.tracer()) as traced:
            call = Call(name, input, principal, tracer=traced.tracer)
            return traced.finish(await self._aenter(call))

    async def _aenter(self, call: Call) -> CallResult:
        import asyncio  # imported here to keep `import glovebox` light

        try:
            await self._admission.aenter()
        except Overloaded as refusal:
            return await asyncio.to_thread(self._recorder.refuse, call, refusal)
        # What the caller put in force for its calls (glovebox.remote.relay_progress, the MCP client to ask)
        # follows the call into its thread (core._carried); traced, the whole context, so the call span is current.
        context = carried_context() if call.tracer is None else contextvars.copy_context()
        run: Callable[[], CallResult] = functools.partial(context.run, self._admitted, call)
        try:
            job = self._pool().submit(run)
        except BaseException:  # closed meanwhile
            self._admission.leave()
            raise
        job.add_done_callback(self._unclaimed)
        return await asyncio.wrap_future(job)

    def _unclaimed(self, job: Future[CallResult]) -> None:
        """A job cancelled before it ran gives its slot back (one that ran did already)."""
        if job.cancelled():
            self._admission.leave()

    @property
    def in_flight(self) -> int:
        """Calls holding an admission slot right now, or sent to the workers and not answered (for metrics)."""
        return self._admission.in_flight if self._workers is None else self._workers.in_flight

    @property
    def queued(self) -> int:
        """Calls waiting for an admission slot (or for a live worker) right now (for metrics)."""
        return self._admission.queued if self._workers is None else self._workers.queued

    def _pool(self) -> CallThreads:
        with self._lock:
            self._check_open()
            if self._threads is None:
                from ._callthreads import CallThreads  # on the first acall: `import glovebox` stays light

                self._threads = CallThreads(self._admission.max_in_flight, "glovebox")
            return self._threads

    def _build_chain(self, executors: Executors) -> None:
        """The call pipeline, in the order a call meets it (see ``glovebox.runtime.handlers``).

        ``_chain`` is the whole of it (``call``); ``_admitted`` starts after admission
        (``acall``, whose admission waits in the coroutine); ``_attempt`` is one attempt
        (an evaluator's call, judged inside the call it judges).
        """
        from ._selection import Selections  # loaded with the first Runtime, not with glovebox

        schemas = SchemaCache()
        attempt_steps: list[Handler] = [
            handlers.Audit(self._recorder),
            handlers.Resolve(self._registry, self._gate, self.visible_tools),
            handlers.Policy(self._gate, None if self._policy_given else self._grants),
            handlers.Breakers(self._breakers),
            handlers.ValidateInput(schemas, Selections(self.home)),
            handlers.Approvals(self._gate),
            handlers.OutputChecks(lambda call: self._attempt(call)),
            handlers.SecretScan(),
        ]
        admitted_steps: list[Handler] = [handlers.Compute(self._admission, self._compute), handlers.Attempts()]
        front: list[Handler] = [handlers.Tracing(self._tracing), handlers.Admission(self._admission, self._recorder)]
        #: The handlers in the order a call meets them (the executor's step comes last).
        self._handlers = (*front, *admitted_steps, *attempt_steps)
        self._attempt = compose(attempt_steps, handlers.Execute(executors, schemas))
        self._admitted = compose(admitted_steps, self._attempt)
        self._chain = compose(front, self._admitted)


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"tool name must be a str, not {type(name).__name__}")


def _check_principal(principal: Any) -> None:
    """A principal is a str (or None): anything else could not even be audited."""
    if principal is not None and not isinstance(principal, str):
        raise TypeError(f"principal must be a str or None, not {type(principal).__name__}")
