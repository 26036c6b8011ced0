"""Ed25519 signatures over an artifact digest and its canonical manifest.

A signature covers both halves of what runs, so neither the code nor its
declared limits, schemas and capabilities can be swapped after signing::

    payload = b"glovebox-signature-v1\\n" + digest + b"\\n" + sha256(canonical manifest JSON)

The signature file (``TOOL.wasm.sig``, JSON) holds the key id, the digest,
the manifest digest and the base64 signature. Keys are raw Ed25519 keys in
PEM files made by ``glovebox keys generate``; a key id is the first 16 hex
digits of the SHA-256 of the raw public key. Trusted public keys live in
``GLOVEBOX_HOME/trusted_keys/*.pub``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ._errors import SignatureError
from ._manifest import Manifest

__all__ = [
    "TrustStore",
    "generate_keypair",
    "key_id",
    "load_private_key",
    "load_public_key",
    "sign_artifact",
    "signature_path",
    "trust_key",
    "verify_signature",
]

_DOMAIN = b"glovebox-signature-v1\n"


def key_id(public: Ed25519PublicKey) -> str:
    """The short, stable identifier of a public key."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def manifest_digest(manifest: Manifest) -> str:
    """``sha256:<hex>`` of the manifest's canonical JSON."""
    return "sha256:" + hashlib.sha256(manifest.to_json().encode()).hexdigest()


def _payload(digest: str, manifest: Manifest) -> bytes:
    return _DOMAIN + digest.encode() + b"\n" + manifest_digest(manifest).encode()


def signature_path(wasm_path: Path) -> Path:
    """Where the signature of an artifact is looked for: ``TOOL.wasm.sig``."""
    return wasm_path.with_name(wasm_path.name + ".sig")


def generate_keypair(directory: Path, name: str) -> tuple[Path, Path]:
    """Write ``NAME.key`` (private, mode 0600) and ``NAME.pub``; refuse to overwrite."""
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / f"{name}.key", directory / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} already exists; refusing to overwrite a key")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(pem)
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    public_path.write_bytes(public_pem)
    return private_path, public_path


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Read an Ed25519 private key (PEM); errors name the file."""
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot read private key {path}: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SignatureError(f"{path} is not an Ed25519 private key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    """Read an Ed25519 public key (PEM); errors name the file."""
    try:
        key = serialization.load_pem_public_key(path.read_bytes())
    except (OSError, ValueError, TypeError) as exc:
        raise SignatureError(f"cannot read public key {path}: {exc}") from None
    if not isinstance(key, Ed25519PublicKey):
        raise SignatureError(f"{path} is not an Ed25519 public key")
    return key


def sign_artifact(wasm_path: Path, manifest: Manifest, private_key: Path, out: Path | None = None) -> Path:
    """Sign an artifact with its manifest; write and return the signature file."""
    key = load_private_key(private_key)
    digest = "sha256:" + hashlib.sha256(wasm_path.read_bytes()).hexdigest()
    document = {
        "version": 1,
        "key_id": key_id(key.public_key()),
        "digest": digest,
        "manifest_digest": manifest_digest(manifest),
        "signature": base64.b64encode(key.sign(_payload(digest, manifest))).decode(),
    }
    target = out or signature_path(wasm_path)
    target.write_text(json.dumps(document, indent=2) + "\n")
    return target


def trust_key(directory: Path, public_key: Path) -> str:
    """Copy a public key into the trusted-keys directory; return ``name:key_id``."""
    public = load_public_key(public_key)
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / public_key.name if public_key.suffix == ".pub" else directory / (public_key.name + ".pub")
    target.write_bytes(public_key.read_bytes())
    return f"{target.stem}:{key_id(public)}"


@dataclass(frozen=True)
class TrustStore:
    """The public keys whose signatures this registry accepts, by key id."""

    keys: dict[str, Ed25519PublicKey]
    names: dict[str, str]

    @classmethod
    def load(cls, directory: Path) -> TrustStore:
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
        raise SignatureError(f"cannot read signature {path}: {exc}") from None
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
    try:
        public.verify(base64.b64decode(str(document.get("signature", "")), validate=True), _payload(digest, manifest))
    except (InvalidSignature, binascii.Error, ValueError):
        raise SignatureError(f"{path}: the signature does not verify with key {signer}") from None
    return signer
