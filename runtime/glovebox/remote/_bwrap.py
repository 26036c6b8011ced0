"""The OS sandbox of a local MCP server: bubblewrap (``bwrap``), where this machine can run it.

:func:`wrap` turns a server's argv into ``bwrap [options] -- argv``:

- the host's root read-only (``--ro-bind / /``), a fresh ``/dev`` and ``/proc``,
  a private ``/tmp`` (tmpfs);
- masked: the glovebox home (an empty read-only tmpfs, so no server sees the
  audit log, the registry or another server's files); the files that hold the machine's
  password hashes (``/etc/shadow``, ``/etc/gshadow``, their backups,
  ``/etc/sudoers``) and the usual per-user credential stores under ``$HOME``
  (``.ssh``, ``.aws``, ``.gnupg``, ``.docker``, ``.kube``, ``.config/gcloud``,
  ``.netrc``...), each replaced by an empty file or directory that nobody may
  read (mode 000; with every capability dropped, not even root in the sandbox);
- read-write: only the server's working directory;
- every namespace unshared (user, pid, ipc, uts, cgroup and **network**: no
  interface but loopback, so no host is reachable), all capabilities dropped,
  a new terminal session, and the sandbox dies with the host.

A server under bubblewrap has no network of its own. When the policy grants
its tool HTTP rules, :func:`wrap` is given the socket of the host's egress
proxy (see :mod:`._egress`): bound into the sandbox, with the in-sandbox
forwarder started first, so the server reaches the granted hosts through the
proxy and nothing else.

:func:`available` says whether bwrap runs here (installed, and able to make its
namespaces inside whatever sandbox this host itself runs in), checked once per
process by running ``bwrap ... true``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["MASKED_FILES", "MASKED_HOME_DIRS", "available", "wrap"]

#: Files replaced by an empty one inside the sandbox (when they exist).
MASKED_FILES = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers")
#: Directories (and files) under the host user's ``$HOME`` hidden inside the sandbox (when they exist).
MASKED_HOME_DIRS = (
    ".ssh",
    ".aws",
    ".azure",
    ".gnupg",
    ".docker",
    ".kube",
    ".config/gcloud",
    ".config/gh",
    ".netrc",
    ".pgpass",
    ".git-credentials",
)


@functools.cache
def available() -> bool:
    """Whether ``bwrap`` is installed and can make a sandbox on this machine (checked once)."""
    binary = shutil.which("bwrap")
    if binary is None:
        return False
    probe = [binary, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--unshare-all"]
    try:
        done = subprocess.run([*probe, "true"], capture_output=True, timeout=10, env={}, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def wrap(argv: Sequence[str], workdir: Path, home: Path, proxy_socket: Path | None = None) -> list[str]:
    """``argv`` run under bubblewrap with ``workdir`` its only writable place (see the module docstring).

    With ``proxy_socket`` (the host's egress proxy), the socket is bound at
    :data:`._egress.SANDBOX_SOCKET` and ``argv`` runs under the forwarder, with its proxy variables set.
    """
    binary = shutil.which("bwrap") or "bwrap"
    options = ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    unreadable = _unreadable(home)
    for masked in _masked_files():
        options += ["--ro-bind", str(unreadable), masked]
    for masked in _masked_dirs():
        options += ["--perms", "0000", "--tmpfs", masked]
    options += ["--tmpfs", str(home), "--bind", str(workdir), str(workdir), "--remount-ro", str(home)]
    if proxy_socket is not None:
        from ._egress import FORWARDER, SANDBOX_SOCKET

        options += ["--bind", str(proxy_socket), SANDBOX_SOCKET]
        argv = [sys.executable, "-I", "-S", "-c", FORWARDER, SANDBOX_SOCKET, "--", *argv]
    options += ["--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session", "--chdir", str(workdir)]
    return [binary, *options, "--", *argv]


def _unreadable(home: Path) -> Path:
    """An empty file nobody may read (mode 000): what a masked file is inside the sandbox."""
    path = home / "mcp-stdio" / ".unreadable"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    path.chmod(0)
    return path


def _masked_files() -> list[str]:
    user_home = Path(os.path.expanduser("~"))
    files = [path for path in MASKED_FILES if os.path.isfile(path)]
    return files + [str(user_home / name) for name in MASKED_HOME_DIRS if (user_home / name).is_file()]


def _masked_dirs() -> list[str]:
    user_home = Path(os.path.expanduser("~"))
    return [str(user_home / name) for name in MASKED_HOME_DIRS if (user_home / name).is_dir()]
