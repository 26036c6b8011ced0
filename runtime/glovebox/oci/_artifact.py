"""The WebAssembly OCI artifact layout (CNCF TAG Runtime's "Wasm OCI Artifact"), as glovebox writes and reads it.

One image manifest (``application/vnd.oci.image.manifest.v1+json``) whose config is
``application/vnd.wasm.config.v0+json`` (``architecture: wasm``, ``os: wasip2``, ``layerDigests``,
``component.exports|imports``) and whose first layer is the component (``application/wasm``), as
``wkg``, Wassette and wasmCloud publish and pull it. glovebox adds a second layer,
``application/vnd.glovebox.manifest.v1+json``: the tool's manifest (canonical JSON), which other
clients skip. The wasm layer's digest is the tool's digest in the registry and the audit log.

Reading is strict, since the manifest comes from the network: the manifest's media type, the
config's, exactly one ``application/wasm`` layer, at most one glovebox manifest layer, sizes and
digests well formed; anything else is ``invalid_artifact`` naming what was found.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..core._errors import InvalidArtifact
from ._reference import check_digest

__all__ = [
    "CONFIG_MEDIA_TYPE",
    "TOOL_MANIFEST_MEDIA_TYPE",
    "MANIFEST_MEDIA_TYPE",
    "WASM_MEDIA_TYPE",
    "Descriptor",
    "WasmArtifact",
    "build_artifact",
    "descriptor_of",
    "parse_artifact",
]

MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.wasm.config.v0+json"
WASM_MEDIA_TYPE = "application/wasm"
TOOL_MANIFEST_MEDIA_TYPE = "application/vnd.glovebox.manifest.v1+json"
#: What an ORAS push of a bare file gives the layer when told no type (accepted as the wasm layer
#: only when no ``application/wasm`` layer is present and the bytes are a component).
_ANNOTATION_TITLE = "org.opencontainers.image.title"


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor: what a manifest says about one blob."""

    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] | None = None

    def to_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.annotations:
            found["annotations"] = dict(self.annotations)
        return found


def descriptor_of(media_type: str, data: bytes, annotations: dict[str, str] | None = None) -> Descriptor:
    import hashlib

    return Descriptor(media_type, "sha256:" + hashlib.sha256(data).hexdigest(), len(data), annotations)


@dataclass(frozen=True)
class WasmArtifact:
    """A parsed Wasm artifact manifest: its config, its component layer, its glovebox manifest layer."""

    config: Descriptor
    wasm: Descriptor
    glovebox: Descriptor | None
    annotations: dict[str, str]


def canonical(document: dict[str, Any]) -> bytes:
    return json.dumps(document, sort_keys=True, separators=(",", ":")).encode()


def build_artifact(
    wasm: bytes, tool_manifest: str, *, name: str, version: str, exports: list[str], imports: list[str]
) -> tuple[bytes, bytes, bytes]:
    """The (config, glovebox manifest layer, image manifest) bytes that publish one component."""
    created = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    wasm_desc = descriptor_of(WASM_MEDIA_TYPE, wasm, {_ANNOTATION_TITLE: f"{name}.wasm"})
    config = canonical(
        {
            "created": created,
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [wasm_desc.digest],
            "component": {"exports": sorted(exports), "imports": sorted(imports), "target": "glovebox:tool/tool"},
        }
    )
    layer = tool_manifest.encode()
    manifest = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": descriptor_of(CONFIG_MEDIA_TYPE, config).to_dict(),
            "layers": [
                wasm_desc.to_dict(),
                descriptor_of(TOOL_MANIFEST_MEDIA_TYPE, layer, {_ANNOTATION_TITLE: f"{name}.glovebox.json"}).to_dict(),
            ],
            "annotations": {
                "org.opencontainers.image.created": created,
                "org.opencontainers.image.title": name,
                "org.opencontainers.image.version": version,
            },
        }
    )
    return config, layer, manifest


def parse_artifact(body: bytes, where: str) -> WasmArtifact:
    """Read an image manifest as a Wasm artifact, refusing what does not fit (see the module docstring)."""
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise InvalidArtifact(f"{where}: the manifest is not JSON") from exc
    if not isinstance(document, dict) or document.get("schemaVersion") != 2:
        raise InvalidArtifact(f"{where}: not an OCI image manifest (schemaVersion 2)")
    media = document.get("mediaType", MANIFEST_MEDIA_TYPE)
    if media != MANIFEST_MEDIA_TYPE:
        raise InvalidArtifact(f"{where}: the manifest is {media!r}, not {MANIFEST_MEDIA_TYPE!r}")
    config = _descriptor(document.get("config"), where, "config")
    if config.media_type != CONFIG_MEDIA_TYPE:
        raise InvalidArtifact(
            f"{where}: the config is {config.media_type!r}, not a WebAssembly artifact's {CONFIG_MEDIA_TYPE!r}",
            details={"media_type": config.media_type},
        )
    layers = document.get("layers")
    if not isinstance(layers, list):
        raise InvalidArtifact(f"{where}: the manifest has no layers list")
    parsed = [_descriptor(layer, where, f"layer {i}") for i, layer in enumerate(layers)]
    wasm = [d for d in parsed if d.media_type == WASM_MEDIA_TYPE]
    ours = [d for d in parsed if d.media_type == TOOL_MANIFEST_MEDIA_TYPE]
    if len(wasm) != 1 or len(ours) > 1:
        found = ", ".join(d.media_type for d in parsed) or "none"
        raise InvalidArtifact(
            f"{where}: a WebAssembly artifact has exactly one {WASM_MEDIA_TYPE!r} layer"
            f" (and at most one {TOOL_MANIFEST_MEDIA_TYPE!r}); this one has: {found}",
            details={"layers": [d.media_type for d in parsed]},
        )
    annotations = document.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise InvalidArtifact(f"{where}: the manifest's annotations are not an object")
    return WasmArtifact(config, wasm[0], ours[0] if ours else None, {str(k): str(v) for k, v in annotations.items()})


def _descriptor(value: Any, where: str, what: str) -> Descriptor:
    if not isinstance(value, dict):
        raise InvalidArtifact(f"{where}: the {what} descriptor is not an object")
    media, digest, size = value.get("mediaType"), value.get("digest"), value.get("size")
    if not isinstance(media, str) or not isinstance(digest, str) or type(size) is not int or size < 0:
        raise InvalidArtifact(f"{where}: the {what} descriptor needs mediaType, digest and a size")
    try:
        check_digest(digest, f"{where}: the {what} digest")
    except ValueError as exc:
        raise InvalidArtifact(str(exc)) from exc
    annotations = value.get("annotations")
    return Descriptor(media, digest, size, annotations if isinstance(annotations, dict) else None)
