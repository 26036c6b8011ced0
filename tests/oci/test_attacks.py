"""A hostile or broken registry, attacked the ways the issue lists; each refused with its exact code.

The registry is the real one (tests/ociregistry.py). Where the attack is the registry's own
answer (bytes that do not match, a redirect, a tag moved mid-registration), a transport between
glovebox and the real registry plays the hostile part: the requests are real, the answers altered.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

import glovebox
from glovebox.oci import ProvenanceStore
from glovebox.oci._artifact import CONFIG_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, WASM_MEDIA_TYPE, canonical
from glovebox.oci._client import OciClient
from glovebox.oci._reference import OciReference

from ..ociregistry import OciRegistry

pytestmark = pytest.mark.system
Hook = Callable[[httpx.Request, httpx.Response], httpx.Response | None]


class Hostile(httpx.BaseTransport):
    """Real requests to the real registry; ``hook`` may replace an answer. Records every request."""

    def __init__(self, hook: Hook) -> None:
        self._real = httpx.HTTPTransport()
        self._hook = hook
        self.requests: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(f"{request.method} {request.url.path}")
        response = self._real.handle_request(request)
        replaced = self._hook(request, response)
        if replaced is None:
            return response
        response.close()
        return replaced

    def close(self) -> None:
        self._real.close()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _publish_raw(
    registry: OciRegistry, repository: str, tag: str, layers: list[tuple[str, bytes]], **over: object
) -> str:
    """Push a hand-made artifact: the given layers, a Wasm config, descriptor fields overridden by ``over``."""
    ref = OciReference.parse(registry.ref(repository, tag))
    config = canonical({"architecture": "wasm", "os": "wasip2"})
    with OciClient(ref) as client:
        client.push_blob(repository, config)
        descriptors = []
        for media, data in layers:
            client.push_blob(repository, data)
            descriptors.append({"mediaType": media, "digest": _digest(data), "size": len(data)})
        descriptors[0].update(over.get("layer", {}))  # type: ignore[call-overload]
        config_desc = {"mediaType": over.get("config_media", CONFIG_MEDIA_TYPE), "digest": _digest(config),
                       "size": len(config)}  # fmt: skip
        body = canonical({"schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE, "config": config_desc,
                          "layers": descriptors})  # fmt: skip
        return client.put_manifest(repository, tag, body, MANIFEST_MEDIA_TYPE)


def _wasm_and_manifest(rt: glovebox.Runtime) -> list[tuple[str, bytes]]:
    info = rt.tool("echo")
    wasm = rt.registry.blob_path(info.digest).read_bytes()
    return [(WASM_MEDIA_TYPE, wasm), ("application/vnd.glovebox.manifest.v1+json", info.manifest.to_json().encode())]


def test_a_layer_whose_bytes_do_not_match_its_digest(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("attack/bytes"))
    wasm_digest = echo_runtime.tool("echo").digest

    def swap(request: httpx.Request, response: httpx.Response) -> httpx.Response | None:
        if request.method == "GET" and request.url.path.endswith(f"/blobs/{wasm_digest}"):
            data = bytearray(response.read())
            data[-1] ^= 0xFF  # same size, one byte changed
            return httpx.Response(200, content=bytes(data))
        return None

    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="hashing to") as caught:
            other.register_oci(oci_registry.ref("attack/bytes"), transport=Hostile(swap))
        assert caught.value.code == "invalid_artifact"
        assert caught.value.details["expected"] == wasm_digest
        assert other.tools() == []


def test_a_manifest_served_for_a_digest_it_does_not_hash_to(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path, build_guest: Callable[[str], Path]
) -> None:
    asked = echo_runtime.push("echo", oci_registry.ref("attack/manifest", "good")).rsplit("@", 1)[1]
    echo_runtime.register(build_guest("echo"), manifest={"name": "echo", "version": "6.6.6"})
    evil = echo_runtime.push("echo@6.6.6", oci_registry.ref("attack/manifest", "evil")).rsplit("@", 1)[1]
    evil_body = httpx.get(
        f"http://{oci_registry.host}/v2/attack/manifest/manifests/{evil}", headers={"Accept": MANIFEST_MEDIA_TYPE}
    ).content

    def substitute(request: httpx.Request, response: httpx.Response) -> httpx.Response | None:
        if request.method == "GET" and request.url.path.endswith(f"/manifests/{asked}"):
            return httpx.Response(200, content=evil_body, headers={"Content-Type": MANIFEST_MEDIA_TYPE})
        return None

    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="the manifest served for") as caught:
            other.register_oci(oci_registry.ref("attack/manifest", "good"), transport=Hostile(substitute))
        assert caught.value.code == "invalid_artifact"


def test_a_media_type_lie_a_layer_called_wasm_that_is_not(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    layers = _wasm_and_manifest(echo_runtime)
    layers[0] = (WASM_MEDIA_TYPE, b"\x1f\x8b\x08\x00 a gzipped tarball, not a component")
    _publish_raw(oci_registry, "attack/lie", "1", layers)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="is not a WebAssembly file") as caught:
            other.register(oci_registry.ref("attack/lie"))
        assert caught.value.details["media_type"] == WASM_MEDIA_TYPE


def test_a_media_type_lie_a_container_image_config(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    config = "application/vnd.oci.image.config.v1+json"
    _publish_raw(oci_registry, "attack/image", "1", _wasm_and_manifest(echo_runtime), config_media=config)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="not a WebAssembly artifact") as caught:
            other.register(oci_registry.ref("attack/image"))
        assert caught.value.details["media_type"] == config


def test_a_tag_moved_between_resolve_and_fetch_registers_what_was_resolved(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path, build_guest: Callable[[str], Path]
) -> None:
    tag = oci_registry.ref("attack/moved", "stable")
    resolved = echo_runtime.push("echo", tag).rsplit("@", 1)[1]
    echo_runtime.register(build_guest("echo"), manifest={"name": "echo", "version": "7.0.0"})
    moved: list[str] = []

    def move(request: httpx.Request, response: httpx.Response) -> httpx.Response | None:
        if request.method == "HEAD" and request.url.path.endswith("/manifests/stable") and not moved:
            moved.append(echo_runtime.push("echo@7.0.0", tag).rsplit("@", 1)[1])  # the tag moves now
        return None

    with glovebox.Runtime(home=tmp_path / "other") as other:
        info = other.register_oci(tag, transport=Hostile(move))
        assert moved and moved[0] != resolved  # the tag did move, mid-registration
        assert info.version == echo_runtime.tool("echo@0.0.0").version
        assert ProvenanceStore(other.home).get(info.name, info.version).manifest_digest == resolved  # type: ignore[union-attr]
        assert other.register(tag).version == "7.0.0"  # the next refresh sees the move


@pytest.fixture
def redirector(oci_registry: OciRegistry) -> Iterator[str]:
    """A server on 127.0.0.1 that redirects every request to the registry under another host name."""
    target = f"http://localhost:{oci_registry.port}"

    class Redirect(http.server.BaseHTTPRequestHandler):
        def _send(self) -> None:
            self.send_response(307)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_PUT = do_POST = _send  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_registry_redirecting_to_another_host(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, redirector: str, tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("attack/redirect"))
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.RegistryError, match="to another host") as caught:
            other.register(f"oci://{redirector}/attack/redirect:1")
        assert caught.value.code == "registry_error"
        assert caught.value.details["redirect"] == f"http://localhost:{oci_registry.port}"


def test_a_blob_redirected_to_another_host_over_plain_http(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("attack/blobredirect"))
    wasm_digest = echo_runtime.tool("echo").digest

    def elsewhere(request: httpx.Request, response: httpx.Response) -> httpx.Response | None:
        if request.method == "GET" and request.url.path.endswith(f"/blobs/{wasm_digest}"):
            return httpx.Response(307, headers={"Location": f"http://169.254.169.254/latest/{wasm_digest}"})
        return None

    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.RegistryError, match="to another host") as caught:
            other.register_oci(oci_registry.ref("attack/blobredirect"), transport=Hostile(elsewhere))
        assert caught.value.details["redirect"] == "http://169.254.169.254"


def test_an_enormous_layer_is_refused_before_its_download(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    layers = _wasm_and_manifest(echo_runtime)
    _publish_raw(oci_registry, "attack/huge", "1", layers, layer={"size": 64 * 2**30})  # it says 64 GiB
    hostile = Hostile(lambda request, response: None)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="not downloaded") as caught:
            other.register_oci(oci_registry.ref("attack/huge"), transport=hostile)
        assert caught.value.details == {"size": 64 * 2**30, "limit": 64 * 2**20}
    assert not [line for line in hostile.requests if line.startswith("GET") and _digest(layers[0][1]) in line]


def test_a_layer_longer_than_declared_stops_mid_download(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, tmp_path: Path
) -> None:
    layers = _wasm_and_manifest(echo_runtime)
    wasm_digest = _digest(layers[0][1])
    _publish_raw(oci_registry, "attack/longer", "1", layers)
    flood = b"\0asm\x0d\0\x01\0" + b"\0" * (8 * 2**20)  # 8 MiB more than the descriptor says, no length given

    def stream(request: httpx.Request, response: httpx.Response) -> httpx.Response | None:
        if request.method == "GET" and request.url.path.endswith(f"/blobs/{wasm_digest}"):
            return httpx.Response(200, content=iter([flood[i : i + 65536] for i in range(0, len(flood), 65536)]))
        return None

    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.InvalidArtifact, match="download stopped") as caught:
            other.register_oci(oci_registry.ref("attack/longer"), transport=Hostile(stream))
        assert caught.value.details["received"] <= len(layers[0][1]) + 2**20  # one read past it, of 8 MiB


def test_an_index_or_docker_image_is_not_a_wasm_artifact(oci_registry: OciRegistry, runtime: glovebox.Runtime) -> None:
    ref = OciReference.parse(oci_registry.ref("attack/index"))
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []})
    with OciClient(ref) as client:
        client.put_manifest("attack/index", "1", body.encode(), "application/vnd.oci.image.index.v1+json")
    with pytest.raises(glovebox.InvalidArtifact, match="not 'application/vnd.oci.image.manifest.v1"):
        runtime.register(oci_registry.ref("attack/index"))
