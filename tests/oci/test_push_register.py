"""Push a registered tool to a real registry, register it on another home, call it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

import glovebox
from glovebox.oci import CONFIG_MEDIA_TYPE, TOOL_MANIFEST_MEDIA_TYPE, WASM_MEDIA_TYPE, ProvenanceStore

from ..ociregistry import OciRegistry

pytestmark = pytest.mark.system


def test_push_then_register_elsewhere_and_call(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    pinned = echo_runtime.push("echo", oci_registry.ref("tools/echo", "1.0"))
    assert pinned.startswith(f"oci://{oci_registry.host}/tools/echo:1.0@sha256:")
    local = echo_runtime.tool("echo")
    with glovebox.Runtime(home=tmp_path / "elsewhere") as other:
        info = other.register(oci_registry.ref("tools/echo", "1.0"))
        assert (info.name, info.digest) == ("echo", local.digest)  # the wasm layer's digest is the tool's
        assert other.call("echo", {"x": 1}).output == {"x": 1}
        record = ProvenanceStore(other.home).get("echo", info.version)
        assert record is not None
        assert record.reference == pinned and record.manifest_digest == pinned.rsplit("@", 1)[1]
        assert record.layer_digest == local.digest


def test_the_layout_is_the_cncf_wasm_artifact(echo_runtime: glovebox.Runtime, oci_registry: OciRegistry) -> None:
    pinned = echo_runtime.push("echo", oci_registry.ref("tools/layout", "v1"))
    digest = pinned.rsplit("@", 1)[1]
    base = f"http://{oci_registry.host}/v2/tools/layout"
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    head = httpx.head(f"{base}/manifests/v1", headers=accept)
    assert head.headers["Docker-Content-Digest"] == digest
    manifest = httpx.get(f"{base}/manifests/{digest}", headers=accept).json()
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == CONFIG_MEDIA_TYPE
    assert [layer["mediaType"] for layer in manifest["layers"]] == [WASM_MEDIA_TYPE, TOOL_MANIFEST_MEDIA_TYPE]
    config = httpx.get(f"{base}/blobs/{manifest['config']['digest']}").json()
    assert (config["architecture"], config["os"]) == ("wasm", "wasip2")
    assert config["layerDigests"] == [manifest["layers"][0]["digest"]]
    assert config["component"]["exports"] == ["call"]
    tool_manifest = httpx.get(f"{base}/blobs/{manifest['layers'][1]['digest']}").json()
    assert tool_manifest["name"] == "echo"
    wasm = httpx.get(f"{base}/blobs/{manifest['layers'][0]['digest']}").content
    assert wasm[:4] == b"\0asm"


def test_a_pinned_digest_registers_without_a_tag(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    pinned = echo_runtime.push("echo", oci_registry.ref("tools/pinned", "1"))
    digest_only = f"oci://{oci_registry.host}/tools/pinned@{pinned.rsplit('@', 1)[1]}"
    with glovebox.Runtime(home=tmp_path / "elsewhere") as other:
        assert other.register(digest_only).digest == echo_runtime.tool("echo").digest


def test_an_unknown_tag_is_a_registry_error(runtime: glovebox.Runtime, oci_registry: OciRegistry) -> None:
    with pytest.raises(glovebox.RegistryError) as caught:
        runtime.register(oci_registry.ref("tools/absent", "1"))
    assert caught.value.code == "registry_error" and caught.value.details["status"] == 404


def test_an_unreachable_registry_is_a_retryable_registry_error(runtime: glovebox.Runtime) -> None:
    with pytest.raises(glovebox.RegistryError) as caught:
        runtime.register("oci://127.0.0.1:9/tools/echo:1")
    assert caught.value.retryable


def test_tools_json_and_the_audit_name_the_layer_digest(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("tools/audited", "1"))
    with glovebox.Runtime(home=tmp_path / "elsewhere") as other:
        info = other.register(oci_registry.ref("tools/audited", "1"))
        other.call("echo", {})
        row = other.audit.tail(1)[0]
        assert row["digest"] == info.digest
        assert json.loads(json.dumps(info.to_dict()))["digest"].startswith("sha256:")
