"""The public signing API: key pairs, ``sign``, the Keyring and the Runtime's signing methods."""

from __future__ import annotations

import json
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import glovebox


@pytest.fixture
def artifact(tmp_path: Path, build_guest: Callable[[str], Path]) -> Path:
    wasm = tmp_path / "art" / "tool.wasm"
    wasm.parent.mkdir()
    wasm.write_bytes(build_guest("echo").read_bytes())
    wasm.with_name("tool.glovebox.toml").write_text('name = "tool"\nversion = "1.0.0"\n')
    return wasm


def test_generate_keypair_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    private, public = glovebox.generate_keypair("release", tmp_path / "keys")
    assert (private, public) == (tmp_path / "keys" / "release.key", tmp_path / "keys" / "release.pub")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert public.read_text().startswith("-----BEGIN PUBLIC KEY-----")
    before = private.read_bytes()
    with pytest.raises(FileExistsError, match="refusing to overwrite"):
        glovebox.generate_keypair("release", tmp_path / "keys")
    assert private.read_bytes() == before


def test_sign_then_verify_names_the_signer(tmp_path: Path, artifact: Path) -> None:
    private, public = glovebox.generate_keypair("release", tmp_path / "keys")
    keyring = glovebox.Keyring(tmp_path / "home")
    assert keyring.keys() == []
    signer = keyring.trust(public)
    assert signer.startswith("release:") and len(signer) == len("release:") + 16
    assert keyring.keys() == [signer]
    assert (tmp_path / "home" / "trusted_keys" / "release.pub").read_bytes() == public.read_bytes()

    sig = glovebox.sign(artifact, private)
    assert sig == artifact.with_name("tool.wasm.sig")
    assert json.loads(sig.read_text())["key_id"] == signer.split(":")[1]
    assert keyring.verify(artifact) == signer
    elsewhere = glovebox.sign(artifact, private, signature=tmp_path / "other.sig")
    assert keyring.verify(artifact, signature=elsewhere) == signer


def test_verify_refuses_each_kind_of_mismatch(tmp_path: Path, artifact: Path) -> None:
    private, public = glovebox.generate_keypair("release", tmp_path / "keys")
    keyring = glovebox.Keyring(tmp_path / "home")
    glovebox.sign(artifact, private)
    with pytest.raises(glovebox.SignatureError, match="not trusted"):
        keyring.verify(artifact)
    keyring.trust(public)
    with pytest.raises(glovebox.SignatureError, match="manifest of tool changed"):
        keyring.verify(artifact, manifest={"name": "tool", "version": "1.0.0", "description": "changed"})
    with pytest.raises(glovebox.SignatureError, match="does not exist"):
        keyring.verify(artifact, signature=tmp_path / "missing.sig")
    artifact.write_bytes(artifact.read_bytes() + b"\0")
    with pytest.raises(glovebox.SignatureError, match="the artifact changed") as info:
        keyring.verify(artifact)
    assert info.value.code == "invalid_signature"


def test_a_key_that_is_not_ed25519_is_refused(tmp_path: Path, artifact: Path) -> None:
    junk = tmp_path / "junk.pub"
    junk.write_text("not a key")
    with pytest.raises(glovebox.SignatureError, match="cannot read public key"):
        glovebox.Keyring(tmp_path / "home").trust(junk)
    with pytest.raises(glovebox.SignatureError, match="cannot read private key"):
        glovebox.sign(artifact, junk)
    assert not artifact.with_name("tool.wasm.sig").exists()


def test_runtime_signing_methods_use_its_home(tmp_path: Path, artifact: Path) -> None:
    private, public = glovebox.generate_keypair("ci", tmp_path / "keys")
    glovebox.sign(artifact, private)
    with glovebox.Runtime(home=tmp_path / "home") as rt:
        assert rt.trusted_keys() == []
        signer = rt.trust_key(public)
        assert rt.trusted_keys() == [signer] == glovebox.Keyring(rt.home).keys()
        assert rt.verify(artifact) == signer
        assert rt.tools() == []  # verifying registers nothing
        assert rt.register(artifact).signer == signer
    with pytest.raises(ValueError, match="closed"):
        rt.verify(artifact)


def test_cryptography_loads_only_when_a_key_is_used() -> None:
    code = (
        "import sys, glovebox; glovebox.Keyring(); rt = glovebox.Runtime(); rt.close();"
        " print('cryptography' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_guides_signing_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build_example: Callable[[str], Path]
) -> None:
    guide = (Path(__file__).resolve().parents[2] / "docs" / "guide" / "operating.md").read_text()
    [code] = re.findall(r"```python\n(import glovebox\n\nprivate, public = .*?)```", guide, re.S)
    shutil.copyfile(build_example("calc"), tmp_path / "calc.wasm")
    shutil.copyfile(build_example("calc").with_name("calc.glovebox.toml"), tmp_path / "calc.glovebox.toml")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/guide/operating.md", "exec"), {})
    with glovebox.Runtime() as rt:
        [signer] = rt.trusted_keys()
        assert signer.startswith("release:") and rt.tool("calc").signer == signer
