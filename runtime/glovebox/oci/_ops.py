"""Push, pull and register: a registered tool to a registry and back, signatures checked first.

``register`` does its steps in this order, each refusing with its own code:

1. resolve the tag to a manifest digest, once (a pinned ``@sha256:`` is not resolved); everything
   after reads by that digest, so a tag moved meanwhile changes nothing;
2. the signature, when the policy (``signatures``), ``require_signatures`` or the caller's ``keys``
   ask for one (``signature_refused``), before any layer is fetched or compiled;
3. the manifest by digest (hashed), read as a Wasm artifact; the component layer (capped before
   the download ends, hashed) and the glovebox manifest layer (``invalid_artifact``);
4. a refresh of the same ``HOST/REPOSITORY`` that may reach more than the version before it is
   refused (``widening_refused``) unless ``accept_widening``;
5. the registry's usual registration (compiled and proven in a child process), the signer recorded,
   and the provenance (reference, manifest digest, layer digest) kept in ``HOME/oci/``.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import (
    InvalidArtifact,
    InvalidManifest,
    RegistryError,
    SignatureRefused,
    ToolNotFound,
    WideningRefused,
)
from ..model._manifest import Manifest, parse_manifest
from ..sandbox._validate import MAX_ARTIFACT_BYTES, check_header
from ._artifact import MANIFEST_MEDIA_TYPE, TOOL_MANIFEST_MEDIA_TYPE, WasmArtifact, build_artifact, parse_artifact
from ._client import OciClient
from ._cosign import CosignKey, signature_tag, verify_artifact
from ._layout import LayoutStore
from ._reference import OciReference
from ._store import Store

if TYPE_CHECKING:
    import httpx

    from ..model._result import ToolInfo
    from ..policy import Policy
    from ..registry._registration import Registrar
    from ..registry._registry import Registry

__all__ = [
    "Fetched",
    "Provenance",
    "Store",
    "fetch",
    "open_store",
    "pull_to",
    "push_tool",
    "register_from",
    "verify_source",
]

#: The glovebox manifest layer's cap (a manifest is kilobytes).
SMALL_BLOB_MAX_BYTES = 1024 * 1024
#: What a manifest request accepts: an index or a docker image too, so that one is refused by name, not as absent.
_ACCEPT = (
    f"{MANIFEST_MEDIA_TYPE}, application/vnd.oci.image.index.v1+json,"
    " application/vnd.docker.distribution.manifest.v2+json, application/vnd.docker.distribution.manifest.list.v2+json"
)


@dataclass(frozen=True)
class Fetched:
    """An artifact read by digest: every byte below checked against it."""

    ref: OciReference
    digest: str
    manifest: bytes
    artifact: WasmArtifact
    config: bytes
    wasm: bytes
    tool_manifest: dict[str, Any] | None
    tool_manifest_bytes: bytes | None


@dataclass(frozen=True)
class Provenance:
    """Where a registered tool came from (``HOME/oci/NAME@VERSION.json``)."""

    name: str
    version: str
    source: str
    reference: str
    manifest_digest: str
    layer_digest: str
    signer: str | None
    resolved_at: str


def open_store(
    source: str | Path, *, insecure: bool, transport: httpx.BaseTransport | None
) -> tuple[Store, OciReference]:
    """The store ``source`` names (``oci://...`` or a layout directory) and the reference in it."""
    if isinstance(source, str) and source.startswith("oci://"):
        ref = OciReference.parse(source, insecure=insecure)
        return OciClient(ref, transport=transport), ref
    root = Path(source)
    if not LayoutStore.is_layout(root):
        raise InvalidArtifact(f"{source} is neither an oci:// reference nor an OCI image layout directory")
    layout = LayoutStore(root)
    tags = [
        str((entry.get("annotations") or {}).get("org.opencontainers.image.ref.name", "")) for entry in layout.entries()
    ]
    tools = [tag for tag in tags if tag and not tag.endswith(".sig")]
    if len(tools) != 1:
        raise InvalidArtifact(f"{root} holds {len(tools)} tagged artifacts ({', '.join(tools) or 'none'}), not one")
    digest = layout.tag_exists("", tools[0], _ACCEPT)
    recorded = layout.source_of(digest or "")
    ref = OciReference.parse(recorded, insecure=True) if recorded else OciReference("layout", "local", tools[0])
    return layout, ref.with_tag(tools[0]).at(digest) if digest else ref


def resolve(store: Store, ref: OciReference) -> str:
    """The manifest digest ``ref`` names now (pinned: its own)."""
    if ref.digest is not None:
        return ref.digest
    if isinstance(store, OciClient):
        return store.resolve(ref, _ACCEPT)
    found = store.tag_exists(ref.repository, ref.tag or "latest", _ACCEPT)
    if found is None:
        raise RegistryError(f"{store.base_url} has no tag {ref.tag}", details={"status": 404})
    return found


def fetch(store: Store, ref: OciReference, digest: str, cap: int = MAX_ARTIFACT_BYTES) -> Fetched:
    """Read the artifact ``digest`` (manifest, config, component, glovebox manifest), all checked."""
    where = f"{ref.name}@{digest}"
    body = store.manifest(ref.repository, digest, _ACCEPT)
    artifact = parse_artifact(body, where)
    config = store.blob(ref.repository, artifact.config.digest, artifact.config.size, SMALL_BLOB_MAX_BYTES)
    wasm = store.blob(ref.repository, artifact.wasm.digest, artifact.wasm.size, cap)
    try:
        check_header(wasm, f"{where}: its {artifact.wasm.media_type!r} layer")
    except InvalidArtifact as exc:
        raise InvalidArtifact(exc.message, details={"media_type": artifact.wasm.media_type}) from exc
    tool_manifest, raw = None, None
    if artifact.glovebox is not None:
        layer = artifact.glovebox
        raw = store.blob(ref.repository, layer.digest, layer.size, SMALL_BLOB_MAX_BYTES)
        try:
            tool_manifest = json.loads(raw)
        except ValueError as exc:
            raise InvalidManifest(f"{where}: its {TOOL_MANIFEST_MEDIA_TYPE} layer is not JSON") from exc
    return Fetched(ref.at(digest), digest, body, artifact, config, wasm, tool_manifest, raw)


# -- push -------------------------------------------------------------------


def push_tool(
    registry: Registry,
    info: ToolInfo,
    target: str,
    *,
    exports: list[str],
    imports: list[str],
    insecure: bool = False,
    transport: httpx.BaseTransport | None = None,
    key_path: str | os.PathLike[str] | None = None,
) -> str:
    """Publish ``info``'s component and manifest at ``target``; return ``oci://...:TAG@sha256:...``."""
    ref = OciReference.parse(target, insecure=insecure)
    if ref.tag is None or ref.digest is not None:
        raise ValueError(f"push to a tag (oci://HOST/REPO:TAG), not to a digest: {target}")
    key = None
    if key_path is not None:
        from ._cosign import load_private_key

        key = load_private_key(key_path)  # before anything is sent
    wasm = registry.blob_path(info.digest).read_bytes()
    config, layer, manifest = build_artifact(
        wasm, info.manifest.to_json(), name=info.name, version=info.version, exports=exports, imports=imports
    )
    with OciClient(ref, transport=transport) as client:
        for blob in (config, wasm, layer):
            client.push_blob(ref.repository, blob)
        digest = client.put_manifest(ref.repository, ref.tag, manifest, MANIFEST_MEDIA_TYPE)
        if key is not None:
            from ._cosign import sign_artifact

            sign_artifact(client, ref, digest, key)
    return str(ref.at(digest))


def sign_reference(
    target: str,
    key_path: str | os.PathLike[str],
    *,
    insecure: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> tuple[str, str]:
    """Sign the artifact ``target`` names (its tag resolved once); return (pinned reference, key id)."""
    from ._cosign import load_private_key, sign_artifact

    ref = OciReference.parse(target, insecure=insecure)
    key = load_private_key(key_path)
    with OciClient(ref, transport=transport) as client:
        digest = client.resolve(ref, _ACCEPT)
        client.manifest(ref.repository, digest, _ACCEPT)  # it exists and is what the digest names
        key_id = sign_artifact(client, ref, digest, key)
    return str(ref.at(digest)), key_id


# -- pull to a layout -------------------------------------------------------


def pull_to(
    source: str, directory: Path, *, insecure: bool = False, transport: httpx.BaseTransport | None = None
) -> str:
    """Copy the artifact (and its cosign signatures) into an OCI layout at ``directory``; return its reference."""
    ref = OciReference.parse(source, insecure=insecure)
    with OciClient(ref, transport=transport) as client:
        digest = client.resolve(ref, _ACCEPT)
        fetched = fetch(client, ref, digest)
        layout = LayoutStore(directory)
        directory.mkdir(parents=True, exist_ok=True)
        for blob in (fetched.config, fetched.wasm, fetched.tool_manifest_bytes):
            if blob is not None:
                layout.write_blob(blob)
        _copy_signatures(client, ref, digest, layout)
        pinned = str(fetched.ref)
        layout.add_manifest(fetched.manifest, MANIFEST_MEDIA_TYPE, ref.tag or digest.replace(":", "-"), pinned)
    return pinned


def _copy_signatures(client: OciClient, ref: OciReference, digest: str, layout: LayoutStore) -> None:
    tag = signature_tag(digest)
    sig_digest = client.tag_exists(ref.repository, tag, _ACCEPT)
    if sig_digest is None:
        return
    body = client.manifest(ref.repository, sig_digest, _ACCEPT)
    document = json.loads(body)
    for item in [document.get("config", {}), *document.get("layers", [])]:
        layout.write_blob(client.blob(ref.repository, item["digest"], int(item["size"]), SMALL_BLOB_MAX_BYTES))
    layout.add_manifest(body, MANIFEST_MEDIA_TYPE, tag)


# -- register ---------------------------------------------------------------


def required_keys(
    policy: Policy, policy_dir: Path, ref: OciReference, keys: list[str], require: bool
) -> list[list[CosignKey]] | None:
    """The key sets a signature must come from (each set satisfied); None: no signature required."""
    sets = [[CosignKey.load(_relative(policy_dir, key)) for key in rule.keys]
            for rule in policy.signatures if fnmatchcase(ref.name, rule.source)]  # fmt: skip
    if keys:
        sets.append([CosignKey.load(key) for key in keys])
    if not sets and require:
        sets.append([])  # required, with no key to check it by: refused, naming why
    return sets or None


def _relative(base: Path, key: str) -> Path:
    path = Path(key).expanduser()
    return path if path.is_absolute() else base / path


def register_from(
    registrar: Registrar,
    registry: Registry,
    home: Path,
    source: str | Path,
    *,
    key_sets_for: Any,
    insecure: bool = False,
    transport: httpx.BaseTransport | None = None,
    accept_widening: bool = False,
) -> ToolInfo:
    """Register the artifact ``source`` names (see the module docstring for the steps)."""
    store, ref = open_store(source, insecure=insecure, transport=transport)
    try:
        digest = resolve(store, ref)
        signer = _check_signatures(store, ref, digest, key_sets_for(ref))
        fetched = fetch(store, ref, digest)
    finally:
        store.close()
    provenance = ProvenanceStore(home)
    if fetched.tool_manifest is None:
        return _register_foreign(registrar, provenance, ref, fetched, signer)
    manifest = parse_manifest(fetched.tool_manifest, f"{ref.name}@{digest}")
    _check_widening(registry, provenance, ref, manifest, accept_widening)
    with tempfile.TemporaryDirectory(prefix="glovebox-oci-") as tmp:
        path = Path(tmp) / f"{manifest.name}.wasm"
        path.write_bytes(fetched.wasm)
        info = registrar.register(path, manifest, None, verified_signer=signer)
    provenance.record(info, ref, fetched)
    return info


def _register_foreign(
    registrar: Registrar, provenance: ProvenanceStore, ref: OciReference, fetched: Fetched, signer: str | None
) -> ToolInfo:
    """Another publisher's component (no glovebox manifest layer), named after its repository's last segment.

    A component of any other world is one tool per exported function (``REPO-FUNCTION``, schemas from
    its WIT types); one exporting glovebox's ``call`` is one tool ``REPO``. Without a manifest it declares
    no capability and no scope, so a new digest cannot widen what it may reach.
    """
    stem = ref.repository.rsplit("/", 1)[-1]
    with tempfile.TemporaryDirectory(prefix="glovebox-oci-") as tmp:
        path = Path(tmp) / f"{stem}.wasm"
        path.write_bytes(fetched.wasm)
        infos = registrar.register_all(path, None, None, verified_signer=signer)
    for info in infos:
        provenance.record(info, ref, fetched)
    return infos[0]


def verify_source(
    source: str | Path,
    *,
    key_sets_for: Any,
    insecure: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> tuple[str, str]:
    """(the pinned reference, the signer) of ``source``'s artifact; nothing else is fetched."""
    store, ref = open_store(source, insecure=insecure, transport=transport)
    try:
        digest = resolve(store, ref)
        signer = _check_signatures(store, ref, digest, key_sets_for(ref))
    finally:
        store.close()
    if signer is None:  # no key set asked for: nothing was checked
        raise SignatureRefused(f"{ref}: no key to check its signature by", details={"reference": str(ref)})
    return str(ref.at(digest)), signer


def _check_signatures(
    store: Store, ref: OciReference, digest: str, key_sets: list[list[CosignKey]] | None
) -> str | None:
    if key_sets is None:
        return None
    signers = [verify_artifact(store, ref, digest, keys) for keys in key_sets]
    if not signers:
        raise SignatureRefused(f"{ref}: no key to check its signature by")
    return signers[0]


def _check_widening(
    registry: Registry, provenance: ProvenanceStore, ref: OciReference, manifest: Manifest, accept: bool
) -> None:
    previous = provenance.latest(ref.name, manifest.name)
    if previous is None or accept:
        return
    try:
        old = registry.resolve(f"{previous.name}@{previous.version}")
    except ToolNotFound:  # removed since: nothing to compare with
        return
    widened = sorted(_reach(manifest) - _reach(old.manifest))
    if widened:
        raise WideningRefused(
            f"{ref}: {manifest.name}@{manifest.version} may reach more than {old.name}@{old.version} registered "
            f"from {ref.name}: " + "; ".join(widened) + " (accept with --accept-widening)",
            details={"reference": str(ref), "widened": widened},
        )


def _reach(manifest: Manifest) -> set[str]:
    """Every capability declaration and required scope, as canonical text (a new one is a widening)."""
    found = {f"scope {scope}" for scope in manifest.required_scopes}
    for capability, entries in manifest.capabilities.model_dump(mode="json").items():
        for entry in entries if isinstance(entries, list) else [entries]:
            if entry:
                found.add(f"{capability} {json.dumps(entry, sort_keys=True, separators=(',', ':'))}")
    return found


class ProvenanceStore:
    """``HOME/oci/NAME@VERSION.json``: the reference and digests each oci-registered tool came from."""

    def __init__(self, home: Path) -> None:
        self.directory = home / "oci"

    def record(self, info: ToolInfo, ref: OciReference, fetched: Fetched) -> Provenance:
        entry = Provenance(
            name=info.name,
            version=info.version,
            source=ref.name,
            reference=str(fetched.ref),
            manifest_digest=fetched.digest,
            layer_digest=fetched.artifact.wasm.digest,
            signer=info.signer,
            resolved_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        )
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / f"{info.name}@{info.version}.json"
        staged = path.with_suffix(".tmp")
        staged.write_text(json.dumps(asdict(entry), indent=2, sort_keys=True))
        staged.replace(path)
        return entry

    def get(self, name: str, version: str) -> Provenance | None:
        try:
            return Provenance(**json.loads((self.directory / f"{name}@{version}.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None

    def latest(self, source: str, name: str) -> Provenance | None:
        """The last registration of tool ``name`` from ``source`` (``HOST/REPOSITORY``)."""
        from ..registry._registry import version_key

        found = [p for p in self._all() if p.source == source and p.name == name]
        return max(found, key=lambda p: version_key(p.version)) if found else None

    def _all(self) -> list[Provenance]:
        entries = []
        for path in sorted(self.directory.glob("*.json")) if self.directory.is_dir() else []:
            try:
                entries.append(Provenance(**json.loads(path.read_text())))
            except (OSError, ValueError, TypeError):
                continue
        return entries
