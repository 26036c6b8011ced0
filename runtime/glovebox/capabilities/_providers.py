"""Secret providers: where the host reads a secret, each a plug-in behind one interface.

A secret is named by a reference ``PROVIDER://REST`` wherever a secret is
named (a policy's ``secrets``, a SQL grant's ``password``, an import's headers):

=====================  ==========================================================
``env://VAR``          an environment variable of the host process
``file:///path``       a file's text, stripped (``file://relative`` is relative)
``keyring://svc/user`` the OS keyring (``keyring``: Secret Service, Keychain, ...)
``exec://cmd?arg=..``  a command's standard output (:mod:`._execsecret`)
``encrypted://name``   an entry of the home's encrypted store (:mod:`._vault`)
``connection://name``  an OAuth connection's access token (``glovebox.connections``)
=====================  ==========================================================

The older two-field form (``provider: env`` + ``source: VAR``) reads the same.

A provider is a :class:`SecretProvider`: ``get(ref) -> bytes`` (the value, or
:class:`SecretUnavailable` whose message names the reference and why, never the
value). :meth:`SecretProvider.read` wraps it in a cache that keeps a value for
``ttl_s`` seconds at most (``env`` and ``file`` keep nothing: they cost less
than the cache). Built-ins register through the entry-point group
:data:`ENTRY_POINT_GROUP` like a third party's, read the first time a provider
name is not known yet. Nothing here logs a value; :func:`get_secret` is the one
door (the stdio MCP child's environment can use it as the HTTP capability does).
"""

from __future__ import annotations

import importlib
import os
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import unquote, urlsplit

__all__ = [
    "ENTRY_POINT_GROUP",
    "SecretProvider",
    "SecretRef",
    "SecretUnavailable",
    "get_secret",
    "parse_ref",
    "provider",
]

#: The entry-point group a distribution registers its secret providers under (``name = module:attr``).
ENTRY_POINT_GROUP = "glovebox.secret_providers"
#: The built-in providers, as entry-point values (read like a third party's).
DEFAULT_PROVIDERS = {
    "env": "glovebox.capabilities._providers:EnvProvider",
    "file": "glovebox.capabilities._providers:FileProvider",
    "keyring": "glovebox.capabilities._providers:KeyringProvider",
    "exec": "glovebox.capabilities._execsecret:ExecProvider",
    "encrypted": "glovebox.capabilities._vault:EncryptedProvider",
    "connection": "glovebox.connections._provider:ConnectionProvider",
}


_REF = re.compile(r"([A-Za-z][A-Za-z0-9-]{0,31})://(.*)", re.DOTALL)


class SecretUnavailable(Exception):
    """A secret could not be read; the message names the reference and the reason, never a value."""


@dataclass(frozen=True)
class SecretRef:
    """A parsed reference: the provider's name and the rest (``keyring://a/b`` → ``keyring``, ``a/b``)."""

    provider: str
    rest: str

    def __str__(self) -> str:
        return f"{self.provider}://{self.rest}"


def parse_ref(text: str, provider: str = "env") -> SecretRef:
    """``PROVIDER://REST``, or a bare source read by ``provider`` (the older two-field form).

    >>> parse_ref("keyring://github/ci")
    SecretRef(provider='keyring', rest='github/ci')
    >>> parse_ref("TOKEN")
    SecretRef(provider='env', rest='TOKEN')
    >>> parse_ref("/run/key", "file")
    SecretRef(provider='file', rest='/run/key')
    """
    found = _REF.match(text)
    if found:
        return SecretRef(found[1].lower(), found[2])
    return SecretRef(provider, text)


class SecretProvider:
    """One place secrets come from. Subclasses set ``name`` and implement :meth:`get`."""

    name: ClassVar[str] = ""
    #: Seconds a value read is kept (0: read every time).
    ttl_s: ClassVar[float] = 0.0

    def __init__(self) -> None:
        self._cache: dict[str, tuple[float, bytes]] = {}
        self._lock = threading.Lock()

    def get(self, ref: SecretRef) -> bytes:
        """The secret's value; raises :class:`SecretUnavailable`."""
        raise NotImplementedError

    def read(self, ref: SecretRef) -> bytes:
        """:meth:`get` behind the provider's bounded-time cache."""
        if self.ttl_s <= 0:
            return self.get(ref)
        key, now = ref.rest, time.monotonic()
        with self._lock:
            kept = self._cache.get(key)
        if kept is not None and kept[0] > now:
            return kept[1]
        value = self.get(ref)
        with self._lock:
            if len(self._cache) >= 1024:
                self._cache.clear()
            self._cache[key] = (now + self.ttl_s, value)
        return value

    def read_in(self, ref: SecretRef, home: Path | None) -> bytes:
        """:meth:`read` for a call on the home ``home`` (None: ``GLOVEBOX_HOME``); a provider that keeps
        its secrets in a home (``connection://``) overrides it, the others read the same everywhere."""
        return self.read(ref)

    def forget(self) -> None:
        """Drop every cached value (after a rotation, or in a benchmark of the uncached cost)."""
        with self._lock:
            self._cache.clear()


class EnvProvider(SecretProvider):
    """``env://VAR``: an environment variable of the host process (an empty one is missing)."""

    name = "env"

    def get(self, ref: SecretRef) -> bytes:
        value = os.environ.get(ref.rest)
        if not value:
            raise SecretUnavailable(f"{ref}: the environment variable is not set")
        return value.encode("utf-8")


class FileProvider(SecretProvider):
    """``file:///path``: a file's text with surrounding white space stripped."""

    name = "file"
    #: The largest secret file read (bytes): a secret is short; a mistake is not read whole.
    max_bytes: ClassVar[int] = 1 << 20

    def get(self, ref: SecretRef) -> bytes:
        path = Path(unquote(ref.rest))
        try:
            with path.open("rb") as handle:
                data = handle.read(self.max_bytes + 1)
        except OSError as exc:
            raise SecretUnavailable(f"{ref}: cannot read the file ({exc.strerror})") from None
        if len(data) > self.max_bytes:
            raise SecretUnavailable(f"{ref}: the file is over {self.max_bytes} bytes")
        value = data.strip()
        if not value:
            raise SecretUnavailable(f"{ref}: the file is empty")
        return value


class KeyringProvider(SecretProvider):
    """``keyring://service/username``: the OS keyring through the ``keyring`` package.

    The backend is the one ``keyring`` picks (Secret Service, macOS Keychain,
    Windows Credential Locker, or the one its configuration names). A locked
    keyring, a missing backend or a missing entry is :class:`SecretUnavailable`
    saying which.
    """

    name = "keyring"
    ttl_s = 30.0

    def get(self, ref: SecretRef) -> bytes:
        service, _, username = ref.rest.partition("/")
        if not service or not username:
            raise SecretUnavailable(f"{ref}: a keyring reference is keyring://SERVICE/USERNAME")
        try:
            import keyring
            from keyring import errors
        except ImportError:
            raise SecretUnavailable(f"{ref}: the keyring package is not installed") from None
        try:
            value = keyring.get_password(unquote(service), unquote(username))
        except errors.KeyringLocked:
            raise SecretUnavailable(f"{ref}: the keyring is locked (unlock it, then retry)") from None
        except errors.NoKeyringError:
            raise SecretUnavailable(f"{ref}: no keyring backend is available on this host") from None
        except errors.KeyringError as exc:
            raise SecretUnavailable(f"{ref}: the keyring refused ({type(exc).__name__})") from None
        except (EOFError, OSError):  # a locked file keyring prompting for its password with no terminal
            raise SecretUnavailable(f"{ref}: the keyring is locked and cannot ask for its password here") from None
        except Exception as exc:  # a backend's own failure (a wrong password, a broken file): never its text
            raise SecretUnavailable(f"{ref}: the keyring refused ({type(exc).__name__})") from None
        if not value:
            raise SecretUnavailable(f"{ref}: no such entry in the keyring")
        return value.encode("utf-8")


_providers: dict[str, SecretProvider] = {}
_providers_lock = threading.Lock()


def provider(name: str) -> SecretProvider:
    """The provider registered as ``name`` (built in, or a distribution's entry point)."""
    found = _providers.get(name)
    if found is not None:
        return found
    with _providers_lock:
        if name not in _providers:
            target = DEFAULT_PROVIDERS.get(name) or _entry_point(name)
            if target is None:
                raise SecretUnavailable(f"{name}://: no secret provider is registered under this name")
            module, _, attribute = target.partition(":")
            made = getattr(importlib.import_module(module), attribute)()
            if not isinstance(made, SecretProvider):
                raise SecretUnavailable(f"{name}://: the registered provider is not a SecretProvider")
            _providers[name] = made
        return _providers[name]


def _entry_point(name: str) -> str | None:
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name == name:
            return str(point.value)
    return None


def get_secret(ref: str | SecretRef, default_provider: str = "env", *, home: Path | None = None) -> bytes:
    """The value a reference names (cached by its provider); raises :class:`SecretUnavailable`.

    ``home``: the home of the call that needs it (a connection's tokens live in a home); None: ``GLOVEBOX_HOME``.
    """
    parsed = ref if isinstance(ref, SecretRef) else parse_ref(ref, default_provider)
    found = provider(parsed.provider)
    return found.read(parsed) if home is None else found.read_in(parsed, home)


def split_url(ref: SecretRef) -> tuple[str, str, str]:
    """The host, path and query of a reference's rest, for providers that take URL-like references."""
    parts = urlsplit(f"x://{ref.rest}")
    return parts.netloc, parts.path, parts.query
