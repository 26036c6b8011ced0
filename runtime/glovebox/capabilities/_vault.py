"""The encrypted store of a home, and its ``encrypted://NAME`` secret provider.

Entries live in ``HOME/secrets/store.json``, each sealed on its own with
AES-256-GCM (``cryptography``, already a dependency): a fresh 96-bit nonce per
write, and the entry's name as associated data, so an entry copied under
another name does not open. The store's key is 32 random bytes,
URL-safe base64, read through another provider: the reference in
``GLOVEBOX_SECRETS_KEY`` (``keyring://glovebox/store``, ``exec://...``,
``env://...``), else the file ``HOME/secrets/store.key`` (mode 0600, made at
the first ``set``). Keep the key elsewhere than the store where it matters: a
key file beside the store only keeps the values out of backups and greps.

Writes take a lock file and replace the store atomically, so two processes
setting entries at once both land. ``glovebox secrets set|list|rm`` is the CLI;
a value is read from standard input, never from the command line.

The provider reads the store of ``GLOVEBOX_HOME`` (or the default home).
"""

from __future__ import annotations

import base64
import json
import os
import re
import secrets as random
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from ..core._settings import home_dir, secrets_key_ref
from ..storage._private import exclusive, write_private_json
from ._providers import SecretProvider, SecretRef, SecretUnavailable, get_secret

__all__ = ["KEY_ENV", "EncryptedProvider", "SecretStore"]

#: The environment variable naming (by reference) where the store's key is read.
KEY_ENV = "GLOVEBOX_SECRETS_KEY"
NAME_PATTERN = r"[A-Za-z0-9_.-]{1,128}"
_MAX_VALUE = 64 * 1024


class SecretStore:
    """The encrypted store of one home: ``set``, ``names``, ``remove`` and ``get``."""

    def __init__(self, home: str | os.PathLike[str] | None = None) -> None:
        self.folder = home_dir(home) / "secrets"
        self.path = self.folder / "store.json"
        self.key_path = self.folder / "store.key"

    def set(self, name: str, value: bytes) -> None:
        """Seal ``value`` under ``name`` (replacing an entry of that name)."""
        _check_name(name)
        if not value or len(value) > _MAX_VALUE:
            raise ValueError(f"a secret is 1 to {_MAX_VALUE} bytes")
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        with self._locked():
            key = self._key(create=True)
            nonce = random.token_bytes(12)
            sealed = AESGCM(key).encrypt(nonce, value, _aad(name))
            entries = self._entries()
            entries[name] = {
                "nonce": _b64(nonce),
                "ciphertext": _b64(sealed),
                "updated": datetime.now(UTC).isoformat(timespec="seconds"),
            }
            self._write(entries)

    def names(self) -> list[dict[str, str]]:
        """The entries' names and when each was last set (never a value)."""
        return [{"name": name, "updated": entry["updated"]} for name, entry in sorted(self._entries().items())]

    def remove(self, name: str) -> bool:
        """Remove an entry; False when there was none."""
        _check_name(name)
        with self._locked():
            entries = self._entries()
            if entries.pop(name, None) is None:
                return False
            self._write(entries)
            return True

    def get(self, name: str) -> bytes:
        """The value of an entry; raises :class:`SecretUnavailable`."""
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        entry = self._entries().get(name)
        if entry is None:
            raise SecretUnavailable(f"encrypted://{name}: no such entry in {self.path}")
        key = self._key(create=False)
        try:
            return AESGCM(key).decrypt(_unb64(entry["nonce"]), _unb64(entry["ciphertext"]), _aad(name))
        except (InvalidTag, ValueError, KeyError):
            raise SecretUnavailable(f"encrypted://{name}: the entry does not open with the store's key") from None

    def _key(self, create: bool) -> bytes:
        ref = secrets_key_ref()
        if ref:
            text = get_secret(ref)
        elif self.key_path.exists():
            text = self.key_path.read_bytes().strip()
        elif create:
            text = base64.urlsafe_b64encode(random.token_bytes(32))
            descriptor = os.open(self.key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as handle:
                handle.write(text + b"\n")
        else:
            raise SecretUnavailable(f"the store's key: neither {KEY_ENV} nor {self.key_path} is there")
        try:
            key = base64.urlsafe_b64decode(text)
        except ValueError:
            key = b""
        if len(key) != 32:
            raise SecretUnavailable("the store's key is not 32 bytes in URL-safe base64")
        return key

    def _entries(self) -> dict[str, dict[str, str]]:
        try:
            document: Any = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            raise SecretUnavailable(f"the store {self.path} cannot be read") from None
        entries = document.get("entries") if isinstance(document, dict) else None
        if document.get("version") != 1 or not isinstance(entries, dict):
            raise SecretUnavailable(f"the store {self.path} is not a version 1 store")
        return entries

    def _write(self, entries: dict[str, dict[str, str]]) -> None:
        write_private_json(self.path, {"version": 1, "entries": entries})

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with exclusive(self.folder / "store.lock"):
            yield


class EncryptedProvider(SecretProvider):
    """``encrypted://NAME``: an entry of the encrypted store of ``GLOVEBOX_HOME``."""

    name = "encrypted"
    ttl_s = 30.0

    def get(self, ref: SecretRef) -> bytes:
        name = ref.rest.strip("/")
        if not re.fullmatch(NAME_PATTERN, name):
            raise SecretUnavailable(f"encrypted://{name}: not an entry name ({NAME_PATTERN})")
        return SecretStore().get(name)


def _check_name(name: str) -> None:
    if not re.fullmatch(NAME_PATTERN, name):
        raise ValueError(f"{name!r} is not an entry name: 1 to 128 of A-Z a-z 0-9 _ . -")


def _aad(name: str) -> bytes:
    return b"glovebox-secret:" + name.encode("utf-8")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)
