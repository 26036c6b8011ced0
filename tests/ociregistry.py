"""A real OCI registry for the tests: Debian's ``docker-registry`` (the CNCF distribution server).

``make test`` installs the package (``make oci-registry``); this module finds its binary, writes a
config (storage in a fresh temporary directory, ``127.0.0.1`` and a free port, blob redirects off,
optionally an htpasswd login) and starts it; the tests that need it skip with the reason when the
binary is absent.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

__all__ = ["OciRegistry", "htpasswd_line", "registry_binary", "start_registry"]

_NAMES = ("docker-registry", "registry")


def registry_binary() -> str | None:
    """The distribution server's binary (Debian names it ``docker-registry``), or None."""
    return next((found for name in _NAMES if (found := shutil.which(name)) is not None), None)


@dataclass
class OciRegistry:
    """One running registry: ``host`` is ``127.0.0.1:PORT``."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def ref(self, repository: str, tag: str = "1") -> str:
        return f"oci://{self.host}/{repository}:{tag}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def htpasswd_line(user: str, password: str) -> str:
    """An htpasswd line (bcrypt, the only hash the distribution server reads)."""
    import bcrypt

    return f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4)).decode()}\n"


def start_registry(binary: str, *, htpasswd: str | None = None, token: dict[str, str] | None = None) -> OciRegistry:
    """Start a registry with its storage in a new temporary directory; wait until ``/v2/`` answers.

    ``htpasswd``: the lines of a Basic login. ``token``: a Bearer login: ``realm``, ``service``,
    ``issuer`` and ``rootcertbundle`` (the PEM certificate the tokens' signing key is in).
    """
    root = Path(tempfile.mkdtemp(prefix="glovebox-oci-registry-"))
    port = _free_port()
    auth = ""
    if htpasswd is not None:
        (root / "htpasswd").write_text(htpasswd)
        auth = f"auth:\n  htpasswd:\n    realm: glovebox-tests\n    path: {root / 'htpasswd'}\n"
    if token is not None:
        auth = "auth:\n  token:\n" + "".join(f"    {key}: {value}\n" for key, value in token.items())
    (root / "config.yml").write_text(
        "version: 0.1\n"
        "log:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
        "  redirect:\n    disable: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n" + auth
    )
    with (root / "registry.log").open("wb") as log:
        process = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=log)
    server = OciRegistry(root, port, process)
    deadline = time.monotonic() + 20
    while True:
        try:
            if httpx.get(f"http://{server.host}/v2/", timeout=1).status_code in (200, 401):
                return server
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            text = (root / "registry.log").read_text(errors="replace")[-2000:]
            server.stop()
            raise RuntimeError(f"the OCI registry did not start: {text}")
        time.sleep(0.05)
