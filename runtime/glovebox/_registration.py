"""Registration: an artifact and its manifest checked, compiled, proven and stored.

The steps, in order, each refusing with the reason: the file's size and wasm
header; the manifest (given, beside the artifact, or the defaults) and its
limits against the host's maxima; the signature, when there is one or the
registry requires one; a conflicting ``name@version``; compilation in a
resource-limited child process (``_compile``); the component's exports and
imports against the glovebox world; one instantiation under the tool's own
limits. Only then are the blob, the compiled artifact and the index row stored, in
one transaction (``Registry.add``). Staged files live while the home's
staging lock is held shared, so ``Runtime.gc`` never removes them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import wasmtime
from wasmtime.component import Component

from ._compile import precompile
from ._compiled import CompiledCache
from ._engine import SharedEngine
from ._errors import InvalidArtifact, InvalidManifest, SignatureError
from ._manifest import HOST_MAXIMA, Manifest, find_manifest, load_manifest, parse_manifest
from ._registry import Registry
from ._result import ToolInfo
from ._sandbox import Sandbox
from ._validate import MAX_ARTIFACT_BYTES, check_component, check_header

__all__ = ["ManifestSource", "Registrar", "resolve_manifest"]

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

    def register(self, path: Path, manifest: ManifestSource, signature: str | os.PathLike[str] | None) -> ToolInfo:
        """Check, compile, prove and store one artifact; return what was registered."""
        data = _read_artifact(path)
        check_header(data, str(path))
        resolved = resolve_manifest(path, manifest)
        if resolved.kind == "mcp-remote":
            raise InvalidManifest(
                f"manifest of {resolved.name!r}: kind 'mcp-remote' is for tools of a remote MCP server "
                f"(`glovebox import mcp URL`), not for the wasm artifact {path}",
                details={"field": "kind", "value": "mcp-remote"},
            )
        resolved.check_within(HOST_MAXIMA)
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        signer = self._check_signature(path, signature, digest, resolved)
        self._registry.check_conflict(resolved, digest)
        with self._registry.staging.shared():
            blob = self._registry.stage_blob(data)
            try:
                return self._store(path, resolved, digest, blob, signer)
            finally:
                blob.unlink(missing_ok=True)

    def _store(self, path: Path, manifest: Manifest, digest: str, blob: Path, signer: str | None) -> ToolInfo:
        size = blob.stat().st_size
        existing = self._compiled.existing(digest)
        if existing is not None:
            component, staged = existing
            try:
                check_component(self._shared.engine, component, str(path))
                self._sandbox.probe(component, manifest.limits, str(path))
                return self._registry.add(manifest, digest, size, signer, blob=blob, compiled=staged)
            finally:
                if staged is not None:
                    staged.staged.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(dir=self._compiled.directory, prefix=".register-") as tmp:
            compiled = Path(tmp) / "compiled.cwasm"
            precompile(blob, compiled, self._shared.settings, str(path))
            component = self._load_compiled(compiled, path)
            check_component(self._shared.engine, component, str(path))
            self._sandbox.probe(component, manifest.limits, str(path))
            info = self._registry.add(
                manifest, digest, size, signer, blob=blob, compiled=self._compiled.staged(digest, compiled)
            )
        self._shared.remember(digest, component)
        return info

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
    if manifest is None:
        found = find_manifest(path)
        return load_manifest(found) if found is not None else Manifest.default_for(path)
    if isinstance(manifest, (Manifest, dict)):
        return parse_manifest(manifest)
    if isinstance(manifest, (str, os.PathLike)):
        return load_manifest(Path(manifest))
    raise TypeError(f"manifest must be a path, a dict or a Manifest, not {type(manifest).__name__}")
