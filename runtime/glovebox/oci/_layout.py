"""An OCI image layout on disk: what ``glovebox pull --to DIR`` writes and ``register DIR`` reads.

The layout is the image-spec's (``oci-layout``, ``index.json``, ``blobs/sha256/HEX``), so other
tools (``oras``, ``skopeo``, ``wkg``) read and write it too. Each manifest in ``index.json`` is named
by ``org.opencontainers.image.ref.name`` (the tag); glovebox also writes ``io.glovebox.source`` (the
``oci://`` reference it was pulled from, with its digest). An artifact's cosign signatures travel
with it under their ``sha256-HEX.sig`` names, so an air-gapped host checks them as a registry's.

Reading is as strict as reading from a registry: every manifest and blob is hashed before use,
sizes are capped before a file is read, and a name that is not ``sha256:`` and 64 hex digits
never becomes a path.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..core._errors import InvalidArtifact
from ._reference import check_digest

__all__ = ["INDEX_MEDIA_TYPE", "LayoutStore", "SOURCE_ANNOTATION", "TAG_ANNOTATION"]

INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
TAG_ANNOTATION = "org.opencontainers.image.ref.name"
SOURCE_ANNOTATION = "io.glovebox.source"
_INDEX_MAX_BYTES = 4 * 1024 * 1024


class LayoutStore:
    """One OCI image layout directory, read and written like a registry's repository."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.base_url = f"oci-layout:{root}"

    def __enter__(self) -> LayoutStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    @staticmethod
    def is_layout(path: Path) -> bool:
        return (path / "oci-layout").is_file() and (path / "index.json").is_file()

    # -- reading ---------------------------------------------------------

    def entries(self) -> list[dict[str, Any]]:
        """The manifests ``index.json`` lists."""
        path = self.root / "index.json"
        try:
            if path.stat().st_size > _INDEX_MAX_BYTES:
                raise InvalidArtifact(f"{path} is over {_INDEX_MAX_BYTES} bytes")
            document = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise InvalidArtifact(f"{self.root} is not an OCI image layout (index.json: {exc})") from exc
        manifests = document.get("manifests") if isinstance(document, dict) else None
        if not isinstance(manifests, list):
            raise InvalidArtifact(f"{path} lists no manifests")
        return [item for item in manifests if isinstance(item, dict)]

    def tag_exists(self, repository: str, tag: str, accept: str) -> str | None:
        for entry in self.entries():
            if (entry.get("annotations") or {}).get(TAG_ANNOTATION) == tag:
                return str(entry.get("digest"))
        return None

    def source_of(self, digest: str) -> str | None:
        """The ``io.glovebox.source`` recorded for ``digest``, if any."""
        for entry in self.entries():
            if entry.get("digest") == digest:
                source = (entry.get("annotations") or {}).get(SOURCE_ANNOTATION)
                return str(source) if source else None
        return None

    def manifest(self, repository: str, digest: str, accept: str) -> bytes:
        return self._read(digest, 4 * 1024 * 1024, "manifest")

    def blob(self, repository: str, digest: str, size: int, cap: int) -> bytes:
        if size > cap:
            raise InvalidArtifact(
                f"{self.root}: blob {digest} declares {size} bytes, over the {cap}-byte limit",
                details={"size": size, "limit": cap},
            )
        data = self._read(digest, size, "blob")
        if len(data) != size:
            raise InvalidArtifact(f"{self.root}: blob {digest} is {len(data)} bytes, its descriptor says {size}")
        return data

    def _read(self, digest: str, limit: int, what: str) -> bytes:
        try:
            check_digest(digest)
        except ValueError as exc:
            raise InvalidArtifact(f"{self.root}: {exc}") from exc
        path = self.root / "blobs" / "sha256" / digest.split(":", 1)[1]
        try:
            size = path.stat().st_size
            if size > limit:
                raise InvalidArtifact(
                    f"{self.root}: {what} {digest} is {size} bytes, over the {limit} expected",
                    details={"size": size, "limit": limit},
                )
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidArtifact(f"{self.root}: {what} {digest} is missing ({exc.strerror or exc})") from exc
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise InvalidArtifact(
                f"{self.root}: {what} {digest} hashes to {actual}", details={"expected": digest, "actual": actual}
            )
        return data

    # -- writing ---------------------------------------------------------

    def write_blob(self, data: bytes) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        directory = self.root / "blobs" / "sha256"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / digest.split(":", 1)[1]
        if not path.is_file():
            staged = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            staged.write_bytes(data)
            staged.replace(path)
        return digest

    def add_manifest(self, body: bytes, media_type: str, tag: str, source: str | None = None) -> str:
        """Store ``body`` and name it ``tag`` in ``index.json`` (replacing the tag's previous entry)."""
        digest = self.write_blob(body)
        (self.root / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        entries = self.entries() if (self.root / "index.json").is_file() else []
        entries = [e for e in entries if (e.get("annotations") or {}).get(TAG_ANNOTATION) != tag]
        annotations = {TAG_ANNOTATION: tag}
        if source:
            annotations[SOURCE_ANNOTATION] = source
        entries.append({"mediaType": media_type, "digest": digest, "size": len(body), "annotations": annotations})
        index = {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": entries}
        staged = self.root / f".index.json.{os.getpid()}.tmp"
        staged.write_text(json.dumps(index, indent=2, sort_keys=True))
        staged.replace(self.root / "index.json")
        return digest
