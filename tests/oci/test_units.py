"""The pure parts of glovebox.oci: references, logins from files and the environment, artifact reading."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import glovebox
from glovebox.oci._artifact import build_artifact, parse_artifact
from glovebox.oci._auth import credentials_for
from glovebox.oci._reference import OciReference


@pytest.mark.parametrize(
    ("text", "host", "repository", "tag", "digest", "scheme"),
    [
        ("oci://127.0.0.1:5000/a/b:1.0", "127.0.0.1:5000", "a/b", "1.0", None, "http"),
        ("oci://localhost/x", "localhost", "x", "latest", None, "http"),
        ("oci://[::1]:5000/x:t", "[::1]:5000", "x", "t", None, "http"),
        ("oci://ghcr.io/org/tool:v1", "ghcr.io", "org/tool", "v1", None, "https"),
        (f"oci://ghcr.io/org/tool@sha256:{'a' * 64}", "ghcr.io", "org/tool", None, f"sha256:{'a' * 64}", "https"),
        (f"oci://ghcr.io/o/t:v2@sha256:{'b' * 64}", "ghcr.io", "o/t", "v2", f"sha256:{'b' * 64}", "https"),
    ],
)
def test_references(text: str, host: str, repository: str, tag: str | None, digest: str | None, scheme: str) -> None:
    ref = OciReference.parse(text)
    assert (ref.host, ref.repository, ref.tag, ref.digest, ref.scheme) == (host, repository, tag, digest, scheme)
    assert OciReference.parse(str(ref)) == ref


@pytest.mark.parametrize(
    "text",
    [
        "https://ghcr.io/a:1",
        "oci://ghcr.io",
        "oci://ghcr.io/UPPER:1",
        "oci://ghcr.io/a:-bad",
        "oci://ghcr.io/a@sha256:short",
        "oci://ghcr.io/a@md5:" + "a" * 32,
        "oci://ho st/a:1",
    ],
)
def test_bad_references_are_value_errors(text: str) -> None:
    with pytest.raises(ValueError):
        OciReference.parse(text)


def test_insecure_is_plain_http_anywhere_else_https() -> None:
    assert OciReference.parse("oci://registry.lan:5000/a:1", insecure=True).base_url == "http://registry.lan:5000"
    assert OciReference.parse("oci://127.0.0.2:5000/a:1").scheme == "https"  # only the loopback names


def test_docker_hub_is_reached_at_its_api_host_with_docker_logins_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert OciReference.parse("oci://docker.io/library/tool:1").base_url == "https://registry-1.docker.io"
    auth = base64.b64encode(b"hub:pw").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert credentials_for("docker.io").username == "hub"  # type: ignore[union-attr]


def test_docker_config_entries(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    auth = base64.b64encode(b"me:pw").decode()
    config = {
        "auths": {
            "https://index.docker.io/v1/": {"auth": auth},
            "ghcr.io": {"username": "u", "password": "p"},
            "token.example": {"identitytoken": "tok"},
        },
        "credsStore": "desktop",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    found = credentials_for("index.docker.io")
    assert found is not None and (found.username, found.password) == ("me", "pw")
    assert "pw" not in repr(found)
    assert credentials_for("ghcr.io").password == "p"  # type: ignore[union-attr]
    assert credentials_for("token.example").identity_token == "tok"  # type: ignore[union-attr]
    assert credentials_for("quay.io") is None


def test_an_unreadable_docker_config_is_a_registry_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{not json")
    monkeypatch.setenv("GLOVEBOX_OCI_CONFIG", str(tmp_path / "config.json"))
    with pytest.raises(glovebox.RegistryError, match="is not a docker config.json"):
        credentials_for("ghcr.io")


def test_built_artifacts_read_back_and_strangers_are_refused() -> None:
    config, layer, manifest = build_artifact(
        b"\0asm\x0d\0\x01\0", '{"name":"t"}', name="t", version="1.0.0", exports=["call"], imports=[]
    )
    artifact = parse_artifact(manifest, "here")
    assert artifact.wasm.size == 8 and artifact.glovebox is not None and artifact.glovebox.size == len(layer)
    document = json.loads(manifest)
    document["layers"].append(document["layers"][0])
    with pytest.raises(glovebox.InvalidArtifact, match="exactly one 'application/wasm' layer"):
        parse_artifact(json.dumps(document).encode(), "here")
    document["layers"] = [{"mediaType": "application/wasm", "digest": "sha256:zz", "size": 1}]
    with pytest.raises(glovebox.InvalidArtifact, match="digest"):
        parse_artifact(json.dumps(document).encode(), "here")
    with pytest.raises(glovebox.InvalidArtifact, match="not JSON"):
        parse_artifact(b"\xff", "here")
