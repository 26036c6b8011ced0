"""Refresh of a tag (a new digest is a new version, widening held back) and OCI layouts on disk."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

import glovebox
from glovebox.cli._main import cli
from glovebox.oci import ProvenanceStore

from ..ociregistry import OciRegistry

pytestmark = pytest.mark.system
HTTP = {"http": [{"host": "api.example.com", "methods": ["GET"]}]}


def _publish(rt: glovebox.Runtime, wasm: Path, version: str, target: str, **manifest: object) -> str:
    rt.register(wasm, manifest={"name": "echo", "version": version, **manifest})
    return rt.push(f"echo@{version}", target).rsplit("@", 1)[1]


def test_refresh_same_digest_changes_nothing_new_digest_is_a_new_version(
    runtime: glovebox.Runtime, oci_registry: OciRegistry, build_guest: Callable[[str], Path], tmp_path: Path
) -> None:
    tag = oci_registry.ref("refresh/echo", "live")
    first = _publish(runtime, build_guest("echo"), "1.0.0", tag)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        assert other.register(tag).version == "1.0.0"
        assert other.register(tag).version == "1.0.0"  # the same digest: nothing new
        second = _publish(runtime, build_guest("echo"), "1.1.0", tag, description="the same reach")
        assert other.register(tag).version == "1.1.0"
        assert sorted(info.version for info in other.tools("echo")) == ["1.0.0", "1.1.0"]
        provenance = ProvenanceStore(other.home)
        assert provenance.get("echo", "1.0.0").manifest_digest == first  # type: ignore[union-attr]
        assert provenance.get("echo", "1.1.0").manifest_digest == second  # type: ignore[union-attr]


def test_a_refresh_that_widens_is_refused_unless_accepted(
    runtime: glovebox.Runtime, oci_registry: OciRegistry, build_guest: Callable[[str], Path], tmp_path: Path
) -> None:
    tag = oci_registry.ref("refresh/widen", "live")
    _publish(runtime, build_guest("echo"), "1.0.0", tag)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        other.register(tag)
        _publish(runtime, build_guest("echo"), "2.0.0", tag, capabilities=HTTP)
        with pytest.raises(glovebox.WideningRefused) as caught:
            other.register(tag)
        assert caught.value.code == "widening_refused"
        assert "api.example.com" in caught.value.message
        assert [info.version for info in other.tools("echo")] == ["1.0.0"]
        assert other.register_oci(tag, accept_widening=True).version == "2.0.0"


def test_a_changed_digest_under_the_same_version_is_refused(
    runtime: glovebox.Runtime, oci_registry: OciRegistry, build_guest: Callable[[str], Path], tmp_path: Path
) -> None:
    tag = oci_registry.ref("refresh/same", "live")
    _publish(runtime, build_guest("echo"), "1.0.0", tag)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        other.register(tag)
        with glovebox.Runtime(home=tmp_path / "publisher2") as publisher:
            _publish(publisher, build_guest("echo"), "1.0.0", tag, description="changed, same version")
        with pytest.raises(glovebox.InvalidManifest, match="bump the version"):
            other.register(tag)


def test_pull_to_a_layout_then_register_offline_with_its_signature(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    pinned = echo_runtime.push("echo", oci_registry.ref("layout/echo", "1"), key=cosign_keys[0])
    layout = tmp_path / "carried"
    assert echo_runtime.pull(oci_registry.ref("layout/echo", "1"), layout) == pinned
    index = json.loads((layout / "index.json").read_text())
    names = sorted(entry["annotations"]["org.opencontainers.image.ref.name"] for entry in index["manifests"])
    assert names[0] == "1" and names[1].endswith(".sig")
    oci_registry_gone = tmp_path / "airgapped"
    with glovebox.Runtime(home=oci_registry_gone) as offline:
        info = offline.register_oci(layout, keys=[str(cosign_keys[1])])
        assert info.signer is not None and offline.call("echo", {"k": "v"}).output == {"k": "v"}
        assert ProvenanceStore(offline.home).get("echo", info.version).reference == pinned  # type: ignore[union-attr]


def test_a_tampered_layout_blob_is_refused(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    echo_runtime.pull(echo_runtime.push("echo", oci_registry.ref("layout/tampered", "1")), tmp_path / "carried")
    wasm_digest = echo_runtime.tool("echo").digest
    blob = tmp_path / "carried" / "blobs" / "sha256" / wasm_digest.split(":")[1]
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    with glovebox.Runtime(home=tmp_path / "offline") as offline:
        with pytest.raises(glovebox.InvalidArtifact, match="hashes to") as caught:
            offline.register(tmp_path / "carried")
        assert caught.value.code == "invalid_artifact"


def test_cli_push_pull_register_and_sign(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    runner = CliRunner()
    keys = tmp_path / "clikeys"
    assert runner.invoke(cli, ["keys", "generate", "ci", "--oci", "--dir", str(keys)]).exit_code == 0
    ref = oci_registry.ref("cli/echo", "1")
    pushed = runner.invoke(cli, ["push", "echo", ref])
    assert pushed.exit_code == 0 and pushed.output.startswith(f"pushed {ref}@sha256:")
    signed = runner.invoke(cli, ["sign", "--oci", ref, "--key", str(keys / "ci.key")])
    assert signed.exit_code == 0 and "signed" in signed.output
    other = str(tmp_path / "other")
    registered = runner.invoke(cli, ["--home", other, "register", ref, "--key", str(keys / "ci.pub")])
    assert registered.exit_code == 0 and "(signed by cosign:" in registered.output
    pulled = runner.invoke(cli, ["pull", ref, "--to", str(tmp_path / "dir")])
    assert pulled.exit_code == 0
    refused = runner.invoke(cli, ["--home", str(tmp_path / "third"), "register", oci_registry.ref("cli/absent")])
    assert refused.exit_code == 1 and "registry_error" in refused.output
