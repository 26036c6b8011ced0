"""``keyring://`` against a real Secret Service: gnome-keyring on a private D-Bus session bus.

This is what a Linux host that keeps secrets in its desktop or server keyring runs; the
``keyring`` package finds it through ``DBUS_SESSION_BUS_ADDRESS``. A secret stored there
reaches the upstream of a call and never the guest; a locked collection is a clear
``SecretUnavailable`` at once (no prompt waited for); a missing entry names itself.
Skipped where ``dbus-daemon`` or ``gnome-keyring-daemon`` is absent (``make test`` installs them).
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import subprocess
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from glovebox.capabilities._providers import SecretUnavailable, get_secret, provider

from .test_http import BuildGuest, Server, client, fetch, local_rule, server  # noqa: F401  (server is a fixture)

keyring = pytest.importorskip("keyring")
secretstorage = pytest.importorskip("secretstorage")
pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        not (shutil.which("dbus-daemon") and shutil.which("gnome-keyring-daemon")),
        reason="needs dbus-daemon and gnome-keyring-daemon (apt-get install dbus gnome-keyring)",
    ),
]

TOKEN = "tok-secret-service-5e4d3c"


@pytest.fixture
def secret_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[object]:
    """A session bus and an unlocked gnome-keyring of its own; ``keyring`` set to its Secret Service backend."""
    from keyring.backends import SecretService

    runtime_dir, data = tmp_path / "run", tmp_path / "data"
    runtime_dir.mkdir(mode=0o700)
    data.mkdir()
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address=1", f"--address=unix:path={runtime_dir}/bus"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    request.addfinalizer(lambda: _stop(bus))
    assert bus.stdout is not None
    address = bus.stdout.readline().strip()
    bus.stdout.close()
    env = {
        **os.environ,
        "DBUS_SESSION_BUS_ADDRESS": address,
        "XDG_RUNTIME_DIR": str(runtime_dir),
        "XDG_DATA_HOME": str(data),
        "HOME": str(tmp_path),
    }
    daemon = subprocess.Popen(
        ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    request.addfinalizer(lambda: _stop(daemon))
    assert daemon.stdin is not None and daemon.stdout is not None
    daemon.stdin.write(b"the keyring's password")
    daemon.stdin.close()
    # It closes its stdout once it has unlocked (or made) the login collection; a client asking
    # before that makes it create a default collection through a prompt, which fails here.
    ready, _, _ = select.select([daemon.stdout], [], [], 30)
    assert ready and daemon.stdout.read() == b"", "gnome-keyring-daemon did not start"
    daemon.stdout.close()
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", address)
    connection = _ready_connection()
    previous = keyring.get_keyring()
    keyring.set_keyring(SecretService.Keyring())  # type: ignore[no-untyped-call]
    provider("keyring").forget()
    try:
        yield secretstorage.get_default_collection(connection)
    finally:
        keyring.set_keyring(previous)
        provider("keyring").forget()
        connection.close()  # type: ignore[attr-defined]


def _stop(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    process.kill()
    process.wait()


def _ready_connection() -> object:
    """A connection once the daemon has made and unlocked its login collection (asking earlier would prompt)."""
    for _ in range(400):
        connection = None
        try:
            connection = secretstorage.dbus_init()
            for collection in secretstorage.get_all_collections(connection):
                if collection.collection_path.endswith("/login") and not collection.is_locked():
                    return connection
        except Exception:  # not on the bus yet
            pass
        if connection is not None:
            connection.close()
        time.sleep(0.05)
    raise AssertionError("gnome-keyring-daemon did not make its login collection")


def test_a_secret_in_the_secret_service_reaches_the_upstream_only(
    secret_service: object,
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,  # noqa: F811  (the fixture imported above)
) -> None:
    keyring.set_password("glovebox-api", "ci", TOKEN)
    assert get_secret("keyring://glovebox-api/ci") == TOKEN.encode()
    secret = {"name": "api", "source": "keyring://glovebox-api/ci", "host": "127.0.0.1", "schemes": ["http"]}
    with client(_isolated_env, build_guest, [local_rule(server)], secrets=[secret]) as rt:
        result = fetch(rt, server.url("/echo"))
    assert result.ok, result.to_dict()
    assert server.seen[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps(result.to_dict())


def test_a_locked_collection_is_a_clear_error_at_once_and_a_missing_entry_names_itself(secret_service: object) -> None:
    keyring.set_password("glovebox-api", "ci", TOKEN)
    with pytest.raises(SecretUnavailable, match="no such entry"):
        get_secret("keyring://glovebox-api/nobody")
    secret_service.lock()  # type: ignore[attr-defined]
    started = time.monotonic()
    with pytest.raises(SecretUnavailable, match="locked"):
        get_secret("keyring://glovebox-api/ci")
    # Refused, not waiting for someone to type a password at a prompt (none can show here).
    assert time.monotonic() - started < 30
    with warnings.catch_warnings():  # keyring's backend leaves the refused read's D-Bus socket to the collector
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
