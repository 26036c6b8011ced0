"""Registry credentials: docker's ``config.json``, else the environment or a secret file; never the agent.

Looked up per registry host, in this order:

1. ``GLOVEBOX_OCI_CONFIG`` (a docker ``config.json``), else ``$DOCKER_CONFIG/config.json``, else
   ``~/.docker/config.json``: the ``auths`` entry for the host (``auth`` = base64 ``user:password``,
   or ``username``/``password``, or an ``identitytoken``). Credential helpers (``credsStore``,
   ``credHelpers``) run programs and are not used: log in with a plain entry or use 2.
2. ``GLOVEBOX_OCI_USERNAME`` with ``GLOVEBOX_OCI_PASSWORD`` or ``GLOVEBOX_OCI_PASSWORD_FILE`` (a
   file holding the password, such as a mounted secret), sent only to the host named by
   ``GLOVEBOX_OCI_HOST`` so that they never reach another registry.

A tool, its manifest and the agent's input never name credentials: they come from the host alone.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from pathlib import Path

from ..core import _settings
from ..core._errors import RegistryError

__all__ = ["Credentials", "credentials_for", "docker_config_path"]

#: Docker Hub's names: ``docker login`` writes ``https://index.docker.io/v1/``.
_DOCKER_HUB = frozenset({"docker.io", "index.docker.io", "registry-1.docker.io"})


@dataclass(frozen=True)
class Credentials:
    """A user name and a password (or an identity token, sent as a refresh token)."""

    username: str
    password: str
    identity_token: str | None = None

    def __repr__(self) -> str:  # never print the secret
        return f"Credentials(username={self.username!r}, password='***')"


def docker_config_path() -> Path:
    """The docker ``config.json`` read for credentials (see the module docstring)."""
    return _settings.docker_config_file()


def credentials_for(host: str) -> Credentials | None:
    """The credentials for registry ``host`` (``HOST[:PORT]``), or None to go anonymous.

    Raises:
        RegistryError: a config file or secret file exists but cannot be read.
    """
    found = _from_docker_config(docker_config_path(), host)
    return found if found is not None else _from_environment(host)


def _from_docker_config(path: Path, host: str) -> Credentials | None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RegistryError(f"cannot read the registry credentials in {path}: {exc.strerror or exc}") from exc
    try:
        auths = json.loads(text).get("auths", {})
    except (ValueError, AttributeError) as exc:
        raise RegistryError(f"{path} is not a docker config.json (a JSON object with 'auths')") from exc
    names = {host, *_DOCKER_HUB} if host in _DOCKER_HUB else {host}
    entry = next((value for key, value in auths.items() if _host_of(key) in names), None)
    if not isinstance(entry, dict):
        return None
    if entry.get("identitytoken"):
        return Credentials("<token>", "", str(entry["identitytoken"]))
    if entry.get("auth"):
        try:
            user, sep, password = base64.b64decode(entry["auth"], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
            raise RegistryError(f"{path}: the auth entry for {host} is not base64 of user:password") from exc
        if sep:
            return Credentials(user, password)
    if entry.get("username") and entry.get("password"):
        return Credentials(str(entry["username"]), str(entry["password"]))
    return None


def _host_of(key: str) -> str:
    """``https://index.docker.io/v1/`` → ``index.docker.io``; ``127.0.0.1:5000`` stays."""
    for prefix in ("https://", "http://"):
        key = key.removeprefix(prefix)
    return key.split("/", 1)[0]


def _from_environment(host: str) -> Credentials | None:
    login = _settings.oci_login()
    user = login["username"]
    if not user or login["host"] != host:
        return None
    password, secret_file = login["password"], login["password_file"]
    if password is None and secret_file:
        try:
            password = Path(secret_file).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as exc:
            raise RegistryError(f"cannot read GLOVEBOX_OCI_PASSWORD_FILE {secret_file}: {exc.strerror or exc}") from exc
    return Credentials(user, password) if password is not None else None
