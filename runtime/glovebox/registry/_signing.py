"""Ed25519 signatures over an artifact digest and its canonical manifest: the primitives.

A signature covers both halves of what runs, so neither the code nor its
declared limits, schemas and capabilities can be swapped after signing::

    payload = b"glovebox-signature-v1\\n" + digest + b"\\n" + sha256(canonical manifest JSON)

The signature file (``TOOL.wasm.sig``, JSON) holds the key id, the digest,
the manifest digest and the base64 signature. Keys are raw Ed25519 keys in
PEM files (``glovebox.generate_keypair``); a key id is the first 16 hex
digits of the SHA-256 of the raw public key. Trusted public keys live in
``GLOVEBOX_HOME/trusted_keys/*.pub``. The public API over these primitives is
in :mod:`glovebox.registry._keyring`.

``cryptography`` is imported on first use of a key, never by ``import glovebox``.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._canonical import sha256_digest, sha256_hex
from ..core._errors import SignatureError
from ..model._manifest import Manifest

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

__all__ = [
    "TrustStore",
    "key_id",
    "load_private_key",
    "load_public_key",
    "new_keypair_pem",
    "signature_document",
    "signature_path",
    "verify_signature",
]

_DOMAIN = b"glovebox-signature-v1\n"


def key_id(public: Ed25519PublicKey) -> str:
    """The short, stable identifier of a public key."""
    from cryptography.hazmat.primitives import serialization

    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)[:16]


def manifest_digest(manifest: Manifest) -> str:
    """``sha256:<hex>`` of the manifest's canonical JSON."""
    return sha256_digest(manifest.to_json())


def _payload(digest: str, manifest: Manifest) -> bytes:
    return _DOMAIN + digest.encode() + b"\n" + manifest_digest(manifest).encode()


def signature_path(wasm_path: Path) -> Path:
    """Where the signature of an artifact is looked for: ``TOOL.wasm.sig``."""
    return wasm_path.with_name(wasm_path.name + ".sig")


def new_keypair_pem() -> tuple[bytes, bytes]:
    """A fresh Ed25519 key pair as (private PKCS#8 PEM, public SubjectPublicKeyInfo PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    private = Ed25519PrivateKey.generate()
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Read an Ed25519 private key (PEM); errors name the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot read private key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read an Ed25519 public key (PEM); errors name the file."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot read public key {path}: {exc}") from exc
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path} is not an Ed25519 public key")
    return key


def signature_document(digest: str, manifest: Manifest, private_key: Path) -> dict[str, Any]:
    """The signature file's JSON document for an artifact digest and its manifest."""
    key = load_private_key(private_key)
    return {
        "version": 1,
        "key_id": key_id(key.public_key()),
        "digest": digest,
        "manifest_digest": manifest_digest(manifest),
        "signature": base64.b64encode(key.sign(_payload(digest, manifest))).decode(),
    }


@dataclass(frozen=True)
class TrustStore:
    """The public keys whose signatures this registry accepts, by key id."""

    keys: dict[str, Ed25519PublicKey]
    names: dict[str, str]

    @classmethod
    def load(cls, directory: Path) -> TrustStore:
        """Read every ``*.pub`` in ``directory`` (none when it does not exist)."""
        keys: dict[str, Ed25519PublicKey] = {}
        names: dict[str, str] = {}
        for path in sorted(directory.glob("*.pub")) if directory.is_dir() else []:
            public = load_public_key(path)
            keys[key_id(public)] = public
            names[key_id(public)] = path.stem
        return cls(keys=keys, names=names)


def _read_signature(path: Path) -> dict[str, object]:
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignatureError(f"cannot read signature {path}: {exc}") from exc
    if not isinstance(document, dict) or document.get("version") != 1:
        raise SignatureError(f"{path} is not a glovebox signature (version 1)")
    return document


def verify_signature(path: Path, digest: str, manifest: Manifest, trust: TrustStore) -> str:
    """Check a signature file against an artifact digest and manifest; return the signer's key id.

    Raises:
        SignatureError: naming what does not match — the artifact, the manifest,
            an unknown signer, or a bad signature.
    """
    document = _read_signature(path)
    signer = str(document.get("key_id", ""))
    if document.get("digest") != digest:
        raise SignatureError(
            f"{path} was made for artifact {document.get('digest')}, not {digest}: the artifact changed"
        )
    if document.get("manifest_digest") != manifest_digest(manifest):
        raise SignatureError(f"{path} was made for another manifest: the manifest of {manifest.name} changed")
    public = trust.keys.get(signer)
    if public is None:
        raise SignatureError(f"{path} is signed by key {signer!r}, which is not trusted by this registry")
    from cryptography.exceptions import InvalidSignature

    try:
        public.verify(base64.b64decode(str(document.get("signature", "")), validate=True), _payload(digest, manifest))
    except (InvalidSignature, binascii.Error, ValueError) as exc:
        raise SignatureError(f"{path}: the signature does not verify with key {signer}") from exc
    return signer
