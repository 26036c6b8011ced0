"""Interoperability: a component pushed by another OCI client (ORAS) registers in glovebox, and ORAS
pulls what glovebox pushed. ORAS is PyPI's ``oras`` (the dev extra), an independent implementation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import glovebox

from ..ociregistry import OciRegistry
from ..typedguests import TYPED, wat_component

pytestmark = pytest.mark.system
oras_client = pytest.importorskip("oras.client", reason="oras is not installed (the dev extra installs it)")


def _oras(registry: OciRegistry):  # type: ignore[no-untyped-def]
    return oras_client.OrasClient(hostname=registry.host, insecure=True)


def _oras_push(registry: OciRegistry, target: str, work: Path, files: list[str]) -> None:
    config = work / "config.json"
    config.write_text(json.dumps({"architecture": "wasm", "os": "wasip2", "layerDigests": []}))
    _oras(registry).push(
        target=f"{registry.host}/{target}",
        files=files,
        manifest_config=f"{config}:application/vnd.wasm.config.v0+json",
        disable_path_validation=True,
        quiet=True,
    )


def test_oras_pushed_component_with_a_glovebox_manifest_registers(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    info = echo_runtime.tool("echo")
    wasm = tmp_path / "echo.wasm"
    wasm.write_bytes(echo_runtime.registry.blob_path(info.digest).read_bytes())
    manifest = tmp_path / "echo.glovebox.json"
    manifest.write_text(info.manifest.to_json())
    files = [f"{wasm}:application/wasm", f"{manifest}:application/vnd.glovebox.manifest.v1+json"]
    _oras_push(oci_registry, "oras/echo:1", tmp_path, files)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        registered = other.register(oci_registry.ref("oras/echo", "1"))
        assert registered.digest == info.digest
        assert other.call("echo", {"via": "oras"}).output == {"via": "oras"}


def test_oras_pushed_component_without_a_glovebox_manifest_registers_under_its_repository(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    wasm = tmp_path / "echo.wasm"
    wasm.write_bytes(echo_runtime.registry.blob_path(echo_runtime.tool("echo").digest).read_bytes())
    _oras_push(oci_registry, "oras/plain:1", tmp_path, [f"{wasm}:application/wasm"])
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.warns(glovebox.ManifestWarning):  # no description, no schema: agents get little
            registered = other.register(oci_registry.ref("oras/plain", "1"))
        assert (registered.name, registered.version) == ("plain", "0.0.0")
        assert registered.digest == echo_runtime.tool("echo").digest
        assert other.call("plain", {"via": "oras"}).output == {"via": "oras"}


def test_oras_pushed_typed_component_registers_as_typed_tools(oci_registry: OciRegistry, tmp_path: Path) -> None:
    wasm = wat_component(TYPED / "hostile.wit", "hostile", TYPED / "hostile.wat", tmp_path / "typed.wasm")
    _oras_push(oci_registry, "oras/greeter:1", tmp_path, [f"{wasm}:application/wasm"])
    with glovebox.Runtime(home=tmp_path / "other") as other:
        first = other.register(oci_registry.ref("oras/greeter", "1"))
        assert first.kind == "component"
        names = sorted(info.name for info in other.tools())
        assert "greeter-echo-str" in names and len(names) == 8
        assert other.call("greeter-echo-str", {"s": "héllo"}).output == "héllo"
        assert other.call("greeter-count", {"items": [1, 2, 3]}).output == 3


def test_oras_pulls_what_glovebox_pushed(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("oras/pulled", "1"))
    files = _oras(oci_registry).pull(target=f"{oci_registry.host}/oras/pulled:1", outdir=str(tmp_path / "out"))
    by_name = {Path(name).name: Path(name).read_bytes() for name in files}
    assert by_name["echo.wasm"] == echo_runtime.registry.blob_path(echo_runtime.tool("echo").digest).read_bytes()
    assert json.loads(by_name["echo.glovebox.json"])["name"] == "echo"
