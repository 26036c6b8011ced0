"""The ``exec`` secret provider: a command that prints the secret (``op read``, ``vault kv get``, ``pass show``).

A reference names the command and its arguments, and may pin the binary::

    exec://op?arg=read&arg=op%3A%2F%2Fci%2Fgithub%2Ftoken&sha256=9f2c...&env=OP_SERVICE_ACCOUNT_TOKEN
    exec:///usr/bin/pass?arg=show&arg=ci/github

- The command (a name looked up on the host's ``PATH`` once, or an absolute
  path) is resolved to an absolute real path; with ``sha256=HEX`` the file's
  digest must match on every read, so a binary swapped on disk is refused. The
  file is opened once, hashed, and run from that open descriptor (Linux), so
  no swap between the check and the start can slip in.
- It runs with a clean environment (``PATH`` = the system default, ``HOME``,
  ``LANG=C.UTF-8``, plus only the variables named by ``env=``), no standard
  input, in its own session, from the home directory.
- ``timeout_ms`` (default 10,000) bounds it: past that the process group is
  killed. ``max_bytes`` (default 64 KiB) caps what is read of its output: past
  that it is killed and nothing is used. Standard error is discarded (it may
  echo the secret); a non-zero exit is reported by its code alone.
- The output, stripped of surrounding white space, is the value; it is kept
  ``ttl_s`` seconds (60).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import IO
from urllib.parse import parse_qs

from ._providers import SecretProvider, SecretRef, SecretUnavailable, split_url

__all__ = ["ExecCommand", "ExecProvider", "file_digest"]

DEFAULT_TIMEOUT_MS = 10_000
DEFAULT_MAX_BYTES = 64 * 1024
_KNOWN = {"arg", "sha256", "env", "timeout_ms", "max_bytes"}


def file_digest(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, hex (what ``sha256=`` pins)."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fd_digest(descriptor: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(descriptor, 1 << 20, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()


class ExecCommand:
    """A parsed ``exec://`` reference: the command, its arguments, the pin and the bounds."""

    def __init__(self, ref: SecretRef) -> None:
        host, path, query = split_url(ref)
        params = parse_qs(query, keep_blank_values=True)
        unknown = set(params) - _KNOWN
        if unknown:
            raise SecretUnavailable(f"exec://{host}{path}: unknown parameter {sorted(unknown)[0]!r}")
        self.label = f"exec://{host}{path}"
        self.command = path if not host else host + path
        self.args = params.get("arg", [])
        pins = params.get("sha256")
        self.pin = pins[0] if pins else None
        self.env_names = params.get("env", [])
        self.timeout_s = _number(params, "timeout_ms", DEFAULT_TIMEOUT_MS, self.label) / 1000
        self.max_bytes = _number(params, "max_bytes", DEFAULT_MAX_BYTES, self.label)

    def resolve(self) -> tuple[str, int]:
        """The command's absolute real path and an open descriptor of it, its digest checked against the pin.

        The command is later run from that descriptor (``/proc/self/fd/N`` on Linux), so
        the file whose digest was checked is the file that runs, even if the path is
        swapped between the check and the start.
        """
        found = self.command if os.path.isabs(self.command) else shutil.which(self.command)
        if not found or not os.path.isfile(found):
            raise SecretUnavailable(f"{self.label}: the command is not found")
        path = os.path.realpath(found)
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise SecretUnavailable(f"{self.label}: cannot open the command ({exc.strerror})") from None
        if self.pin is not None and _fd_digest(descriptor) != self.pin.lower():
            os.close(descriptor)
            raise SecretUnavailable(f"{self.label}: the command's digest does not match its pin (swapped on disk?)")
        return path, descriptor

    def environment(self) -> dict[str, str]:
        env = {"PATH": os.defpath, "LANG": "C.UTF-8", "HOME": str(Path.home())}
        env.update({name: os.environ[name] for name in self.env_names if name in os.environ})
        return env


class ExecProvider(SecretProvider):
    """``exec://COMMAND?arg=...``: what a command prints (see the module docstring)."""

    name = "exec"
    ttl_s = 60.0

    def get(self, ref: SecretRef) -> bytes:
        command = ExecCommand(ref)
        path, descriptor = command.resolve()
        pinned = f"/proc/self/fd/{descriptor}"
        executable = pinned if os.path.exists(pinned) else path
        try:
            process = subprocess.Popen(
                [path, *command.args],
                executable=executable,
                pass_fds=(descriptor,) if executable == pinned else (),
                env=command.environment(),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                cwd=str(Path.home()),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise SecretUnavailable(f"{command.label}: cannot run the command ({exc.strerror})") from None
        finally:
            os.close(descriptor)
        assert process.stdout is not None
        output = _Bounded(process.stdout, command.max_bytes)
        reader = threading.Thread(target=output.run, daemon=True)
        reader.start()
        reader.join(command.timeout_s)
        if reader.is_alive() or output.over:
            _kill(process)
            reader.join()
            process.wait()
            if output.over:
                raise SecretUnavailable(f"{command.label}: the command printed over {command.max_bytes} bytes")
            raise SecretUnavailable(f"{command.label}: the command ran over {command.timeout_s * 1000:.0f} ms")
        code = process.wait()
        if code != 0:
            raise SecretUnavailable(f"{command.label}: the command exited with code {code}")
        value = b"".join(output.chunks).strip()
        if not value:
            raise SecretUnavailable(f"{command.label}: the command printed nothing")
        return value


class _Bounded:
    """Reads a pipe until its end, or until it passed ``limit`` bytes (then ``over`` is set)."""

    def __init__(self, stream: IO[bytes], limit: int) -> None:
        self.stream, self.limit = stream, limit
        self.chunks: list[bytes] = []
        self.size, self.over = 0, False

    def run(self) -> None:
        try:
            while chunk := self.stream.read1(65536):  # type: ignore[attr-defined]
                self.size += len(chunk)
                if self.size > self.limit:
                    self.over = True
                    self.chunks.clear()
                    return
                self.chunks.append(chunk)
        finally:
            self.stream.close()


def _kill(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


def _number(params: dict[str, list[str]], name: str, default: int, label: str) -> int:
    values = params.get(name)
    if not values:
        return default
    try:
        value = int(values[0])
    except ValueError:
        raise SecretUnavailable(f"{label}: {name} is not a whole number") from None
    if value <= 0:
        raise SecretUnavailable(f"{label}: {name} must be positive")
    return value
