"""Signing, public: key pairs, signatures, and the keys a home trusts.

``generate_keypair`` and ``sign`` are for whoever publishes an artifact;
:class:`Keyring` is the trusting side (``GLOVEBOX_HOME/trusted_keys``), cheap to
build: no engine, no database. ``Runtime.verify``, ``Runtime.trust_key`` and
``Runtime.trusted_keys`` use the keyring of the Runtime's home. Signers are
named ``NAME:KEY_ID`` everywhere (``ToolInfo.signer`` too): ``NAME`` is the
trusted key file's stem, ``KEY_ID`` the first 16 hex digits of the SHA-256 of
the raw public key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ..core._canonical import file_digest
from ..core._errors import SignatureError
from ..core._settings import trusted_keys_dir
from ._registration import ManifestSource, resolve_manifest
from ._signing import (
    TrustStore,
    key_id,
    load_public_key,
    new_keypair_pem,
    signature_document,
    signature_path,
    verify_signature,
)

__all__ = ["Keyring", "generate_keypair", "sign"]

PathLike = str | os.PathLike[str]


def generate_keypair(name: str, directory: PathLike = ".") -> tuple[Path, Path]:
    """Create an Ed25519 key pair: ``NAME.key`` (private, mode 0600) and ``NAME.pub`` in ``directory``.

    Args:
        name: the key's name; a registry that trusts ``NAME.pub`` names its signer ``NAME``.
        directory: where to write both files (created if missing).

    Returns:
        The paths of the private and the public key.

    Raises:
        FileExistsError: either file exists already (a key is never overwritten).
    """
    return write_keypair(name, directory, new_keypair_pem)


def write_keypair(name: str, directory: PathLike, make: Callable[[], tuple[bytes, bytes]]) -> tuple[Path, Path]:
    """Write the PEM pair ``make()`` answers as ``NAME.key`` (mode 0600, created exclusively) and ``NAME.pub``.

    Raises:
        FileExistsError: either file exists already (a key is never overwritten).
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    private_path, public_path = folder / f"{name}.key", folder / f"{name}.pub"
    for path in (private_path, public_path):
        if path.exists():
            raise FileExistsError(f"{path} already exists; refusing to overwrite a key")
    private_pem, public_pem = make()
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(private_pem)
    public_path.write_bytes(public_pem)
    return private_path, public_path


def sign(
    wasm_path: PathLike,
    key_path: PathLike,
    *,
    manifest: ManifestSource = None,
    signature: PathLike | None = None,
) -> Path:
    """Sign an artifact together with its manifest; write the signature file and return its path.

    Args:
        wasm_path: the ``.wasm`` component.
        key_path: an Ed25519 private key (PEM), e.g. from :func:`generate_keypair`.
        manifest: the manifest to sign with it: a path, a dict or a ``Manifest``;
            default: the one ``register`` would find beside the artifact, else the defaults.
        signature: where to write the signature (default: ``WASM.sig`` beside the artifact,
            where ``register`` and ``verify`` look for it).

    Raises:
        SignatureError: the key cannot be read or is not an Ed25519 private key.
        InvalidManifest: the manifest is malformed.
    """
    wasm = Path(wasm_path)
    resolved = resolve_manifest(wasm, manifest)
    document = signature_document(_digest(wasm), resolved, Path(key_path))
    target = Path(signature) if signature is not None else signature_path(wasm)
    target.write_text(json.dumps(document, indent=2) + "\n")
    return target


def _digest(path: Path) -> str:
    return file_digest(path)


class Keyring:
    """The public keys a glovebox home trusts, and signature checks against them.

    Keys are PEM files in ``HOME/trusted_keys/*.pub``. Building a Keyring reads
    nothing; each method reads the directory afresh.

    Args:
        home: the glovebox home (default: ``GLOVEBOX_HOME``, else the per-user data directory).
    """

    def __init__(self, home: PathLike | None = None) -> None:
        self.directory = trusted_keys_dir(home)

    def trust(self, public_key_path: PathLike) -> str:
        """Trust signatures made with a public key (copied into the trusted-keys directory).

        Returns:
            The signer name ``NAME:KEY_ID`` (``NAME`` is the key file's stem).

        Raises:
            SignatureError: the file is not an Ed25519 public key.
        """
        source = Path(public_key_path)
        public = load_public_key(source)
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.directory / (source.name if source.suffix == ".pub" else source.name + ".pub")
        target.write_bytes(source.read_bytes())
        return f"{target.stem}:{key_id(public)}"

    def keys(self) -> list[str]:
        """The trusted signers, ``NAME:KEY_ID``, sorted by name.

        Raises:
            SignatureError: a file in the directory is not an Ed25519 public key.
        """
        trust = TrustStore.load(self.directory)
        return sorted(f"{name}:{key}" for key, name in trust.names.items())

    def verify(self, wasm_path: PathLike, *, manifest: ManifestSource = None, signature: PathLike | None = None) -> str:
        """Check an artifact's signature against its manifest and the trusted keys.

        Args:
            wasm_path: the ``.wasm`` component.
            manifest: the manifest it was signed with (a path, a dict or a ``Manifest``);
                default: the one beside the artifact, else the defaults, as ``register`` does.
            signature: the signature file (default: ``WASM.sig`` beside the artifact).

        Returns:
            Who signed: ``NAME:KEY_ID``.

        Raises:
            SignatureError: the signature is missing or unreadable, was made for other
                contents or another manifest, names an untrusted key, or does not verify.
        """
        wasm = Path(wasm_path)
        sig_path = Path(signature) if signature is not None else signature_path(wasm)
        if not sig_path.is_file():
            raise SignatureError(f"signature file {sig_path} does not exist")
        resolved = resolve_manifest(wasm, manifest)
        trust = TrustStore.load(self.directory)
        key = verify_signature(sig_path, _digest(wasm), resolved, trust)
        return f"{trust.names[key]}:{key}"
