"""Secret providers against the real thing: the environment, files, a keyring file backend,
real commands (and the attacks on them: hanging, flooding, swapped on disk), the encrypted store."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

import glovebox
from glovebox.capabilities import _providers as providers_module
from glovebox.capabilities._providers import SecretUnavailable, get_secret, parse_ref, provider
from glovebox.capabilities._secrets import read_secret
from glovebox.capabilities._vault import SecretStore
from glovebox.cli._main import cli

from .test_http import BuildGuest, Server, client, fetch, local_rule, server  # noqa: F401  (server is a fixture)

keyring = pytest.importorskip("keyring")
file_backends = pytest.importorskip("keyrings.alt.file")

TOKEN = "tok-9f8e7d6c5b4a"


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    for name in ("keyring", "exec", "encrypted"):
        provider(name).forget()
    yield
    for name in ("keyring", "exec", "encrypted"):
        provider(name).forget()


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


# -- env and file: today's syntax and the references -----------------------------------------


def test_env_and_file_read_the_same_in_both_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", TOKEN)
    (tmp_path / "token").write_text(f"  {TOKEN}\n")
    assert read_secret("env", "API_TOKEN") == TOKEN
    assert read_secret("env", "env://API_TOKEN") == TOKEN
    assert read_secret("file", str(tmp_path / "token")) == TOKEN
    assert read_secret("env", f"file://{tmp_path / 'token'}") == TOKEN
    assert read_secret("env", "MISSING_VAR") is None
    assert read_secret("file", str(tmp_path / "nothing")) is None


def test_a_reference_names_its_provider_in_a_rule_and_a_conflict_is_refused() -> None:
    rule = glovebox.SecretRule(name="gh", source="keyring://github/ci", host="api.github.com")
    assert rule.provider == "keyring"
    with pytest.raises(ValueError, match="differs from the reference"):
        glovebox.SecretRule(name="gh", provider="env", source="keyring://github/ci", host="api.github.com")
    assert parse_ref("exec://op?arg=read").provider == "exec"


def test_an_unknown_provider_is_unavailable_by_name() -> None:
    with pytest.raises(SecretUnavailable, match="no secret provider is registered"):
        get_secret("vault://kv/x")


# -- keyring ----------------------------------------------------------------------------------


@pytest.fixture
def plaintext_keyring(tmp_path: Path) -> Iterator[object]:
    backend = file_backends.PlaintextKeyring()
    backend.file_path = str(tmp_path / "keyring.cfg")
    previous = keyring.get_keyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def test_keyring_reads_a_real_file_backend_and_caches_for_a_bounded_time(plaintext_keyring: object) -> None:
    keyring.set_password("github", "ci", TOKEN)
    assert get_secret("keyring://github/ci") == TOKEN.encode()
    keyring.set_password("github", "ci", "rotated")
    assert get_secret("keyring://github/ci") == TOKEN.encode()  # within ttl_s: the cached value
    provider("keyring").forget()
    assert get_secret("keyring://github/ci") == b"rotated"
    with pytest.raises(SecretUnavailable, match="no such entry"):
        get_secret("keyring://github/nobody")
    with pytest.raises(SecretUnavailable, match="SERVICE/USERNAME"):
        get_secret("keyring://github")


def test_a_locked_keyring_is_a_clear_error_not_a_prompt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "python_keyring").mkdir(parents=True)
    locked = file_backends.EncryptedKeyring()
    locked.file_path = str(data / "python_keyring" / "crypted_pass.cfg")
    locked.keyring_key = "the keyring's password"
    locked.set_password("keyring-setting", "password reference", "password reference value")
    locked._write_config_value("keyring-setting", "scheme", locked.scheme)
    locked._write_config_value("keyring-setting", "version", locked.version)
    locked.set_password("github", "ci", TOKEN)
    env = {
        **os.environ,
        "XDG_DATA_HOME": str(data),
        "PYTHON_KEYRING_BACKEND": "keyrings.alt.file.EncryptedKeyring",
    }
    started = time.monotonic()
    # No terminal (a new session) and no standard input: the keyring stays locked.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from glovebox.cli._main import main; main()",
            "secrets",
            "check",
            "keyring://github/ci",
        ],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        start_new_session=True,
        timeout=60,
    )
    assert done.returncode == 1, done
    assert "keyring://github/ci: the keyring is locked" in done.stderr
    assert TOKEN not in done.stdout + done.stderr
    assert time.monotonic() - started < 30


# -- exec -------------------------------------------------------------------------------------


def test_exec_reads_a_real_command_with_a_clean_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    printer = script(tmp_path, "print-token", f"printf '{TOKEN}\\n'")
    assert get_secret(f"exec://{printer}") == TOKEN.encode()
    leak = script(tmp_path, "show-env", 'printf "%s|%s" "${HOST_SECRET:-unset}" "${PASSED:-unset}"')
    monkeypatch.setenv("HOST_SECRET", "host-only")
    monkeypatch.setenv("PASSED", "named")
    assert get_secret(f"exec://{leak}") == b"unset|unset"
    provider("exec").forget()
    assert get_secret(f"exec://{leak}?env=PASSED") == b"unset|named"


def test_exec_resolves_a_name_on_path_and_passes_arguments(tmp_path: Path) -> None:
    assert get_secret("exec://printf?arg=%25s-%25s&arg=a&arg=b") == b"a-b"


def test_exec_that_hangs_is_killed_at_its_timeout(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    hang = script(tmp_path, "hang", f"echo $$ > {pid_file}; exec sleep 60")
    started = time.monotonic()
    with pytest.raises(SecretUnavailable, match=r"ran over 300 ms"):
        get_secret(f"exec://{hang}?timeout_ms=300")
    assert time.monotonic() - started < 10
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # the killed process is reaped at once; allow the kernel a moment
            os.kill(pid, 0)
            time.sleep(0.05)


def test_exec_that_prints_gigabytes_is_cut_at_its_cap(tmp_path: Path) -> None:
    flood = script(tmp_path, "flood", "exec cat /dev/zero")
    started = time.monotonic()
    with pytest.raises(SecretUnavailable, match=r"printed over 1048576 bytes"):
        get_secret(f"exec://{flood}?max_bytes=1048576")
    assert time.monotonic() - started < 10


def test_exec_swapped_on_disk_is_refused_by_its_pin(tmp_path: Path) -> None:
    command = script(tmp_path, "op", f"printf '{TOKEN}'")
    pin = hashlib.sha256(command.read_bytes()).hexdigest()
    assert get_secret(f"exec://{command}?sha256={pin}") == TOKEN.encode()
    provider("exec").forget()
    command.write_text("#!/bin/sh\nprintf 'attacker'\n")
    with pytest.raises(SecretUnavailable, match="digest does not match its pin"):
        get_secret(f"exec://{command}?sha256={pin}")


def test_exec_failures_say_the_code_never_the_output(tmp_path: Path) -> None:
    failing = script(tmp_path, "fails", f"echo '{TOKEN}' >&2; exit 3")
    with pytest.raises(SecretUnavailable) as info:
        get_secret(f"exec://{failing}")
    assert "exited with code 3" in str(info.value) and TOKEN not in str(info.value)
    with pytest.raises(SecretUnavailable, match="not found"):
        get_secret("exec:///no/such/command")
    with pytest.raises(SecretUnavailable, match="unknown parameter 'shell'"):
        get_secret("exec://printf?shell=1")


# -- the encrypted store ----------------------------------------------------------------------


def test_the_store_seals_each_entry_and_never_holds_a_value_in_clear(_isolated_env: Path) -> None:
    store = SecretStore(_isolated_env)
    store.set("github", TOKEN.encode())
    store.set("openai", b"second")
    assert [entry["name"] for entry in store.names()] == ["github", "openai"]
    assert get_secret("encrypted://github") == TOKEN.encode()
    text = store.path.read_text()
    assert TOKEN not in text
    assert oct(store.path.stat().st_mode & 0o777) == "0o600" and oct(store.key_path.stat().st_mode & 0o777) == "0o600"
    # An entry copied under another name does not open (the name is sealed with it).
    document = json.loads(text)
    document["entries"]["openai"] = document["entries"]["github"]
    store.path.write_text(json.dumps(document))
    with pytest.raises(SecretUnavailable, match="does not open"):
        store.get("openai")
    assert store.remove("github") and not store.remove("github")


def test_the_store_key_comes_from_another_provider(_isolated_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    monkeypatch.setenv("STORE_KEY", base64.urlsafe_b64encode(b"k" * 32).decode())
    monkeypatch.setenv("GLOVEBOX_SECRETS_KEY", "env://STORE_KEY")
    store = SecretStore(_isolated_env)
    store.set("db", b"pg-password")
    assert not store.key_path.exists()
    assert store.get("db") == b"pg-password"
    monkeypatch.setenv("STORE_KEY", base64.urlsafe_b64encode(b"x" * 32).decode())
    with pytest.raises(SecretUnavailable, match="does not open"):
        store.get("db")


def test_the_cli_reads_values_from_stdin_and_never_prints_one(_isolated_env: Path) -> None:
    def glovebox_cli(*args: str, stdin: str = "") -> Result:
        return CliRunner().invoke(cli, list(args), input=stdin, prog_name="glovebox", catch_exceptions=False)

    stored = glovebox_cli("secrets", "set", "github", stdin=TOKEN + "\n")
    assert stored.exit_code == 0 and stored.stdout == "stored encrypted://github\n"
    listed = glovebox_cli("secrets", "list", "--json")
    assert [entry["name"] for entry in json.loads(listed.stdout)] == ["github"]
    checked = glovebox_cli("secrets", "check", "encrypted://github")
    assert checked.stdout == f"ok: {len(TOKEN)} bytes\n"
    assert all(TOKEN not in done.output for done in (stored, listed, checked))
    assert glovebox_cli("secrets", "rm", "github").exit_code == 0
    assert glovebox_cli("secrets", "rm", "github").exit_code == 1
    assert glovebox_cli("secrets", "set", "bad name", stdin="x").exit_code == 2


# -- end to end: a reference in a policy's secret rule ----------------------------------------


def test_a_policy_secret_from_the_encrypted_store_reaches_the_upstream_only(
    _isolated_env: Path,
    build_guest: BuildGuest,
    server: Server,  # noqa: F811  (the fixture imported above)
) -> None:
    SecretStore(_isolated_env).set("api", TOKEN.encode())
    secret = {"name": "api", "source": "encrypted://api", "host": "127.0.0.1", "schemes": ["http"]}
    with client(_isolated_env, build_guest, [local_rule(server)], secrets=[secret]) as rt:
        result = fetch(rt, server.url("/echo"))
    assert server.seen[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert TOKEN not in json.dumps(result.to_dict())


# -- a third party's provider, registered by entry point ---------------------------------------


def test_a_distributions_provider_is_found_by_its_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "acme_vault.py").write_text(
        "from glovebox.capabilities._providers import SecretProvider, SecretUnavailable\n"
        "class AcmeVault(SecretProvider):\n"
        "    name = 'acme'\n"
        "    ttl_s = 5.0\n"
        "    def get(self, ref):\n"
        "        if ref.rest != 'kv/ci':\n"
        "            raise SecretUnavailable(f'{ref}: no such path')\n"
        "        return b'from-acme'\n"
    )
    info = tmp_path / "acme_vault-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-vault\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[glovebox.secret_providers]\nacme = acme_vault:AcmeVault\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(providers_module, "_providers", dict(providers_module._providers))  # forgotten after
    rule = glovebox.SecretRule(name="ci", source="acme://kv/ci", host="api.example.com")
    assert rule.provider == "acme"
    assert read_secret(rule.provider, rule.source) == "from-acme"
    with pytest.raises(SecretUnavailable, match="acme://kv/other: no such path"):
        get_secret("acme://kv/other")
