"""Registration: an artifact and its manifest checked, compiled, proven and stored.

The steps, in order, each refusing with the reason: the file's size and wasm
header; the manifest (given, beside the artifact, or the defaults) and its
limits against the host's maxima; the signature, when there is one or the
registry requires one; a conflicting ``name@version``; compilation in a
resource-limited child process (``_compile``, its deadline scaled by the
artifact's size); the component's exports and imports against the glovebox
world — or, for a component exporting functions of its own instead of ``call``,
one manifest per function (``_exports``: kind ``component``, schemas from its WIT
types); one instantiation under the tool's own limits. Only then are the blob,
the compiled artifact and the index row stored, in one transaction
(``Registry.add``). Staged files live while the home's staging lock is held
shared, so ``Runtime.gc`` never removes them.
"""

from __future__ import annotations

import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime.component import Component

from ..core._canonical import sha256_digest
from ..core._errors import InvalidArtifact, InvalidManifest, ManifestWarning, SignatureError
from ..engine._compile import precompile
from ..engine._engine import SharedEngine
from ..model._manifest import (
    HOST_MAXIMA,
    Limits,
    Manifest,
    find_manifest,
    load_manifest,
    manifest_warnings,
    parse_manifest,
)
from ..model._result import ToolInfo
from ..sandbox._sandbox import Sandbox
from ..sandbox._typed import Unsupported, exports_glovebox_call, typed_exports
from ..sandbox._validate import MAX_ARTIFACT_BYTES, check_component, check_header, check_imports
from ._compiled import CompiledCache
from ._exports import package_docs, typed_manifests
from ._registry import Registry, version_key

__all__ = ["ManifestSource", "Registrar", "resolve_manifest"]

logger = logging.getLogger("glovebox")

ManifestSource = Manifest | dict[str, Any] | str | os.PathLike[str] | None


class Registrar:
    """Registers artifacts into one registry."""

    def __init__(
        self,
        registry: Registry,
        compiled: CompiledCache,
        sandbox: Sandbox,
        trusted_keys_dir: Path,
        require_signatures: bool,
    ) -> None:
        self._registry = registry
        self._compiled = compiled
        self._sandbox = sandbox
        self._shared: SharedEngine = sandbox.shared
        self.trusted_keys_dir = trusted_keys_dir
        self.require_signatures = require_signatures
        registry.sweep_leftovers()  # a dead process's staged files, once per Runtime

    def register(
        self,
        path: Path,
        manifest: ManifestSource,
        signature: str | os.PathLike[str] | None,
        *,
        verified_signer: str | None = None,
    ) -> ToolInfo:
        """Check, compile, prove and store one artifact; return what was registered.

        ``verified_signer``: the artifact's signature was already checked elsewhere (an ``oci://``
        artifact's cosign signature, :mod:`glovebox.oci`); record this signer instead of looking
        for a local signature file.
        """
        data = _read_artifact(path)
        check_header(data, str(path))
        return self.register_all(path, manifest, signature, data, verified_signer=verified_signer)[0]

    def register_all(
        self,
        path: Path,
        manifest: ManifestSource,
        signature: str | os.PathLike[str] | None,
        data: bytes | None = None,
        *,
        verified_signer: str | None = None,
    ) -> list[ToolInfo]:
        """``register``, answering every tool made: one for a glovebox tool, one per function of a typed component."""
        if data is None:
            data = _read_artifact(path)
            check_header(data, str(path))
        resolved = resolve_manifest(path, manifest)
        infos = self._register(path, data, [resolved], signature, None, verified_signer, typed=True)
        for info in infos:
            for warning in [*manifest_warnings(info.manifest), *self._shadowed(info)]:
                warnings.warn(warning, ManifestWarning, stacklevel=3)
        return infos

    def _shadowed(self, info: ToolInfo) -> list[str]:
        """A warning when a bare ``info.name`` does not resolve to what was just registered."""
        current = self._registry.resolve(info.name)
        if version_key(info.version) >= version_key(current.version):
            return []
        return [
            f"{info.name}@{info.version} is older than {current.name}@{current.version}, which a bare "
            f"{info.name!r} still resolves to: call {info.name}@{info.version} by its version, "
            "or give this tool a name of its own or a higher version"
        ]

    def register_many(
        self,
        path: Path,
        manifests: list[Manifest],
        signature: str | os.PathLike[str] | None = None,
        deprecate: dict[str, str] | None = None,
    ) -> list[ToolInfo]:
        """Register one artifact under several manifests (and deprecate ``deprecate``), all or none.

        The artifact is checked, compiled and proven once; every manifest is
        checked before anything is stored, and the rows go in one transaction.
        """
        data = _read_artifact(path)
        check_header(data, str(path))
        return self._register(path, data, manifests, signature, deprecate)

    def _register(
        self,
        path: Path,
        data: bytes,
        manifests: list[Manifest],
        signature: str | os.PathLike[str] | None,
        deprecate: dict[str, str] | None,
        verified_signer: str | None = None,
        *,
        typed: bool = False,
    ) -> list[ToolInfo]:
        digest = sha256_digest(data)
        signers = set()
        for resolved in manifests:
            _check_not_remote(resolved, path)
            resolved.check_within(HOST_MAXIMA)
            checked = self._check_signature(path, signature, digest, resolved) if verified_signer is None else None
            signers.add(verified_signer or checked)
            self._registry.check_conflict(resolved, digest)
        signer = signers.pop() if len(signers) == 1 else None
        with self._registry.staging.shared():
            blob = self._registry.stage_blob(data)
            try:
                docs = package_docs(data) if typed else None
                infos = self._store(path, manifests, digest, blob, signer, deprecate, docs)
            finally:
                blob.unlink(missing_ok=True)
        self._compile_native(digest, infos)
        return infos

    def _compile_native(self, digest: str, infos: list[ToolInfo]) -> None:
        """Compile the artifact for the native core now, so that the first call does not.

        Only where a call would run there (a core is built, and a tool of the artifact
        calls ``glovebox:tool``'s export, not a typed one). The registration stands
        whatever happens: an artifact the core cannot link is remembered as such and
        runs on the Python path, and a compile that fails otherwise is tried again by
        the first call (which then says why).
        """
        core = self._sandbox.native_core
        if core is None or all(info.manifest.export is not None for info in infos):
            return
        try:
            self._compiled.get(digest)
            self._compiled.native(digest, core)
        except Exception as exc:
            logger.warning("the native core could not compile %s yet (%s); its first call will", digest, exc)

    def _store(
        self,
        path: Path,
        manifests: list[Manifest],
        digest: str,
        blob: Path,
        signer: str | None,
        deprecate: dict[str, str] | None,
        docs: dict[str, str] | None = None,
    ) -> list[ToolInfo]:
        size = blob.stat().st_size
        existing = self._compiled.existing(digest)
        if existing is not None:
            component, staged = existing
            try:
                manifests = self._checked(component, manifests, docs, str(path), digest)
                self._sandbox.probe(component, _tightest(manifests), str(path))
                return self._registry.add_many(
                    manifests, digest, size, signer, blob=blob, compiled=staged, deprecate=deprecate
                )
            finally:
                if staged is not None:
                    staged.staged.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(dir=self._compiled.directory, prefix=".register-") as tmp:
            compiled = Path(tmp) / "compiled.cwasm"
            precompile(blob, compiled, self._shared.settings, str(path))
            component = self._load_compiled(compiled, path)
            manifests = self._checked(component, manifests, docs, str(path), digest)
            self._sandbox.probe(component, _tightest(manifests), str(path))
            infos = self._registry.add_many(
                manifests,
                digest,
                size,
                signer,
                blob=blob,
                compiled=self._compiled.staged(digest, compiled),
                deprecate=deprecate,
            )
        self._shared.remember(digest, component)
        return infos

    def _checked(
        self,
        component: Component,
        manifests: list[Manifest],
        docs: dict[str, str] | None,
        source: str,
        digest: str,
    ) -> list[Manifest]:
        """The manifests to store: as given for a glovebox tool, one per function for a typed component.

        ``docs`` is None when only glovebox tools may be registered (``register_many``).
        """
        engine = self._shared.engine
        if docs is None or exports_glovebox_call(engine, component):
            check_component(engine, component, source)
            return manifests
        try:
            exports = typed_exports(engine, component)
        except Unsupported as exc:
            raise InvalidArtifact(f"{source} cannot be a tool: {exc}") from exc
        check_imports(engine, component, source)
        typed = typed_manifests(manifests[0], exports, docs, source)
        for manifest in typed:
            manifest.check_within(HOST_MAXIMA)
            self._registry.check_conflict(manifest, digest)
        return typed

    def _load_compiled(self, compiled: Path, path: Path) -> Component:
        try:
            return self._shared.load(compiled)
        except wasmtime.WasmtimeError as exc:
            reason = " ".join(line.strip() for line in str(exc).strip().splitlines()[:4])
            raise InvalidArtifact(f"{path} cannot run on this host: {reason}") from exc

    def _check_signature(
        self, path: Path, signature: str | os.PathLike[str] | None, digest: str, manifest: Manifest
    ) -> str | None:
        from ._signing import TrustStore, signature_path, verify_signature  # cryptography only when registering

        sig_path = Path(signature) if signature is not None else signature_path(path)
        if not sig_path.is_file():
            if signature is not None:
                raise SignatureError(f"signature file {sig_path} does not exist")
            if self.require_signatures:
                raise SignatureError(
                    f"{path} is not signed and this registry requires signatures (expected {sig_path})"
                )
            return None
        trust = TrustStore.load(self.trusted_keys_dir)
        key = verify_signature(sig_path, digest, manifest, trust)
        return f"{trust.names[key]}:{key}"


def _tightest(manifests: list[Manifest]) -> Limits:
    """The field-by-field minimum of the manifests' limits: one probe proves the artifact starts under all."""
    limits = manifests[0].limits
    for manifest in manifests[1:]:
        limits = limits.tighter(manifest.limits)
    return limits


def _read_artifact(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise InvalidArtifact(f"{path} is {size} bytes, over the {MAX_ARTIFACT_BYTES}-byte artifact limit")
        return path.read_bytes()
    except OSError as exc:
        raise InvalidArtifact(f"cannot read {path}: {exc.strerror or exc}") from exc


def resolve_manifest(path: Path, manifest: ManifestSource) -> Manifest:
    """The manifest for an artifact: the one given, the one beside it, or the defaults."""
    stem = Manifest.default_for(path).name  # the name of a manifest without one
    if manifest is None:
        found = find_manifest(path)
        return load_manifest(found, default_name=stem) if found is not None else Manifest.default_for(path)
    if isinstance(manifest, (Manifest, dict)):
        return parse_manifest(manifest, default_name=stem)
    if isinstance(manifest, (str, os.PathLike)):
        return load_manifest(Path(manifest), default_name=stem)
    raise TypeError(f"manifest must be a path, a dict or a Manifest, not {type(manifest).__name__}")


def _check_not_remote(manifest: Manifest, path: Path) -> None:
    """A wasm artifact cannot be registered as a remote MCP server's tool."""
    if manifest.kind == "mcp-remote":
        raise InvalidManifest(
            f"manifest of {manifest.name!r}: kind 'mcp-remote' is for tools of a remote MCP server "
            f"(`glovebox import mcp URL`), not for the wasm artifact {path}",
            details={"field": "kind", "value": "mcp-remote"},
        )
