"""cosign-compatible signatures of an OCI artifact: ECDSA P-256 over the simple-signing payload.

The format is cosign's (``cosign sign --key``, ``cosign verify --key``), so either tool checks
what the other signed:

- the *payload* (``application/vnd.dev.cosign.simplesigning.v1+json``) names the artifact by its
  manifest digest::

      {"critical": {"identity": {"docker-reference": "HOST/REPO"},
                    "image": {"docker-manifest-digest": "sha256:..."},
                    "type": "cosign container image signature"}, "optional": null}

- the signature is ECDSA P-256 with SHA-256 over the payload's bytes, DER, base64 in the layer's
  ``dev.cosignproject.cosign/signature`` annotation;
- the signature manifest is stored in the same repository under the tag ``sha256-<HEX>.sig``,
  one layer per signature (a new signature is appended).

A signature counts only when its payload names the very digest being registered: a signature of
another artifact, or an old signature copied to a new artifact's ``.sig`` tag, names another
digest and is refused. Keys are PEM: a public key (``PUBLIC KEY``, what ``cosign generate-key-pair``
writes as ``cosign.pub``) and an unencrypted PKCS#8 private key (``glovebox keys generate --oci``;
cosign reads it with ``cosign import-key-pair``). A key id is the first 16 hex digits of the
SHA-256 of the public key's DER. ``cryptography`` is imported on first use.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core._errors import InvalidArtifact, RegistryError, SignatureRefused
from ._artifact import MANIFEST_MEDIA_TYPE, canonical, descriptor_of
from ._reference import OciReference

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ec import EllipticCurvePrivateKey, EllipticCurvePublicKey

    from ._client import OciClient
    from ._store import Store

__all__ = [
    "PAYLOAD_MEDIA_TYPE",
    "SIGNATURE_ANNOTATION",
    "CosignKey",
    "generate_keypair",
    "load_private_key",
    "new_keypair_pem",
    "payload_for",
    "sign_artifact",
    "signature_tag",
    "verify_artifact",
]

PAYLOAD_MEDIA_TYPE = "application/vnd.dev.cosign.simplesigning.v1+json"
SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
_CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
_PAYLOAD_MAX_BYTES = 64 * 1024
_MAX_SIGNATURES = 32


def signature_tag(digest: str) -> str:
    """``sha256:HEX`` → ``sha256-HEX.sig`` (where cosign keeps an artifact's signatures)."""
    algorithm, _, hexdigits = digest.partition(":")
    return f"{algorithm}-{hexdigits}.sig"


def payload_for(ref: OciReference, digest: str) -> bytes:
    """The simple-signing payload naming ``digest`` of ``ref``'s repository."""
    document = {
        "critical": {
            "identity": {"docker-reference": ref.name},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": None,
    }
    return json.dumps(document, separators=(",", ":")).encode()


@dataclass(frozen=True)
class CosignKey:
    """A trusted public key and its id."""

    key: EllipticCurvePublicKey
    key_id: str
    source: str

    @classmethod
    def load(cls, path: Path | str) -> CosignKey:
        """Read a PEM public key (ECDSA P-256).

        Raises:
            SignatureRefused: unreadable, or not an ECDSA P-256 public key.
        """
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec

        try:
            key = serialization.load_pem_public_key(Path(path).read_bytes())
        except (OSError, ValueError) as exc:
            raise SignatureRefused(f"cannot read the cosign public key {path}: {exc}") from exc
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
            raise SignatureRefused(f"{path} is not an ECDSA P-256 public key (what cosign keys are)")
        return cls(key, public_key_id(key), str(path))


def public_key_id(key: EllipticCurvePublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    der = key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(der).hexdigest()[:16]


def new_keypair_pem() -> tuple[bytes, bytes]:
    """A fresh ECDSA P-256 key pair: (PKCS#8 private PEM, public PEM)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    private = ec.generate_private_key(ec.SECP256R1())
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private_pem, public_pem


def generate_keypair(name: str, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write a new ECDSA P-256 pair ``NAME.key`` (PKCS#8, mode 0600) and ``NAME.pub`` into ``directory``.

    Raises:
        FileExistsError: either file exists (a key is never overwritten).
    """
    from ..registry._keyring import write_keypair

    return write_keypair(name, directory, new_keypair_pem)


def load_private_key(path: str | os.PathLike[str]) -> EllipticCurvePrivateKey:
    """An unencrypted PEM ECDSA P-256 private key (PKCS#8 or SEC1).

    Raises:
        ValueError: unreadable, encrypted, or another kind of key (the message says which).
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    data = Path(path).read_bytes()
    if b"ENCRYPTED" in data.split(b"\n", 1)[0]:
        raise ValueError(f"{path} is an encrypted key: export it unencrypted (PKCS#8 PEM) to sign with glovebox")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path} is not a PEM private key: {exc}") from exc
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError(f"{path} is not an ECDSA P-256 private key (glovebox keys generate --oci NAME)")
    return key


def sign_artifact(client: OciClient, ref: OciReference, digest: str, key: EllipticCurvePrivateKey) -> str:
    """Sign ``digest`` of ``ref`` and store the signature beside it (appended); return the key id."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    payload = payload_for(ref, digest)
    signature = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
    tag = signature_tag(digest)
    layers = _existing_layers(client, ref, tag)
    layer = descriptor_of(PAYLOAD_MEDIA_TYPE, payload, {SIGNATURE_ANNOTATION: signature}).to_dict()
    layers = [item for item in layers if item.get("digest") != layer["digest"] or item != layer] + [layer]
    config = canonical(
        {
            "architecture": "",
            "config": {},
            "created": "0001-01-01T00:00:00Z",
            "history": [{"created": "0001-01-01T00:00:00Z"}],
            "os": "",
            "rootfs": {"type": "layers", "diff_ids": [item["digest"] for item in layers]},
        }
    )
    client.push_blob(ref.repository, payload)
    client.push_blob(ref.repository, config)
    manifest = canonical(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": descriptor_of(_CONFIG_MEDIA_TYPE, config).to_dict(),
            "layers": layers,
        }
    )
    client.put_manifest(ref.repository, tag, manifest, MANIFEST_MEDIA_TYPE)
    return public_key_id(key.public_key())


def _existing_layers(client: OciClient, ref: OciReference, tag: str) -> list[dict[str, Any]]:
    digest = client.tag_exists(ref.repository, tag, MANIFEST_MEDIA_TYPE)
    if digest is None:
        return []
    document = json.loads(client.manifest(ref.repository, digest, MANIFEST_MEDIA_TYPE))
    return [item for item in document.get("layers", []) if item.get("mediaType") == PAYLOAD_MEDIA_TYPE]


def verify_artifact(client: Store, ref: OciReference, digest: str, keys: list[CosignKey]) -> str:
    """The signer (``cosign:KEY_ID``) of the first valid signature of ``digest`` by one of ``keys``.

    Raises:
        SignatureRefused: no signature, or none valid for this digest by a trusted key (every reason named).
    """
    details = {"reference": str(ref), "digest": digest}
    if not keys:
        raise SignatureRefused(f"{ref}: signatures are required but no cosign public key is trusted", details=details)
    tag = signature_tag(digest)
    try:
        sig_digest = client.tag_exists(ref.repository, tag, MANIFEST_MEDIA_TYPE)
    except RegistryError as exc:
        raise SignatureRefused(f"{ref}@{digest}: cannot read its signatures: {exc.message}", details=details) from exc
    if sig_digest is None:
        raise SignatureRefused(f"{ref}@{digest} is not signed (no {tag} in {ref.name})", details=details)
    layers = _signature_layers(client, ref, sig_digest)
    reasons = []
    for layer in layers[:_MAX_SIGNATURES]:
        reason, signer = _check_layer(client, ref, digest, layer, keys)
        if signer is not None:
            return signer
        reasons.append(reason)
    raise SignatureRefused(
        f"{ref}@{digest}: no valid signature by a trusted key: " + ("; ".join(reasons) or "no signature layers"),
        details={**details, "reasons": reasons},
    )


def _signature_layers(client: Store, ref: OciReference, sig_digest: str) -> list[dict[str, Any]]:
    try:
        document = json.loads(client.manifest(ref.repository, sig_digest, MANIFEST_MEDIA_TYPE))
        layers = [item for item in document.get("layers", []) if item.get("mediaType") == PAYLOAD_MEDIA_TYPE]
    except (ValueError, AttributeError, InvalidArtifact, RegistryError) as exc:
        raise SignatureRefused(f"{ref}: its signature manifest cannot be read: {exc}") from exc
    return [item for item in layers if isinstance(item, dict)]


def _check_layer(
    client: Store, ref: OciReference, digest: str, layer: dict[str, Any], keys: list[CosignKey]
) -> tuple[str, str | None]:
    """(why it does not count, None) or ("", the signer)."""
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec

    annotations = layer.get("annotations") or {}
    try:
        signature = base64.b64decode(annotations.get(SIGNATURE_ANNOTATION, ""), validate=True)
        size = int(layer["size"])
        payload = client.blob(ref.repository, str(layer["digest"]), size, _PAYLOAD_MAX_BYTES)
        named = json.loads(payload)["critical"]["image"]["docker-manifest-digest"]
    except (binascii.Error, KeyError, TypeError, ValueError, InvalidArtifact, RegistryError) as exc:
        return f"an unreadable signature ({exc})", None
    if not signature:
        return "a signature layer without a signature", None
    if named != digest:
        return f"a signature of another artifact ({named})", None
    for key in keys:
        try:
            key.key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))
        except InvalidSignature:
            continue
        return "", f"cosign:{key.key_id}"
    return "a signature by a key that is not trusted (or a tampered one)", None
