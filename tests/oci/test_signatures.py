"""cosign-compatible signatures of OCI artifacts: signed on push, checked before anything compiles."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

import glovebox
from glovebox.oci import generate_oci_keypair

from ..ociregistry import OciRegistry

pytestmark = pytest.mark.system
ACCEPT = {"Accept": "application/vnd.oci.image.manifest.v1+json"}


def _policy(tmp_path: Path, public: Path, source: str = "*") -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "version: 1\ndefaults: {action: allow}\n"
        f"signatures:\n  - source: '{source}'\n    keys: [{public.relative_to(tmp_path)}]\n"
    )
    return path


def _sig_manifest(registry: OciRegistry, repository: str, digest: str) -> tuple[bytes, dict]:
    url = f"http://{registry.host}/v2/{repository}/manifests/{digest.replace(':', '-')}.sig"
    response = httpx.get(url, headers=ACCEPT)
    response.raise_for_status()
    return response.content, response.json()


def _put_sig(registry: OciRegistry, repository: str, digest: str, body: bytes) -> None:
    url = f"http://{registry.host}/v2/{repository}/manifests/{digest.replace(':', '-')}.sig"
    httpx.put(url, content=body, headers={"Content-Type": ACCEPT["Accept"]}).raise_for_status()


def test_signed_on_push_verified_on_register(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = cosign_keys
    pinned = echo_runtime.push("echo", oci_registry.ref("sig/echo"), key=private)
    digest = pinned.rsplit("@", 1)[1]
    with glovebox.Runtime(home=tmp_path / "other", policy=_policy(tmp_path, public)) as other:
        info = other.register(oci_registry.ref("sig/echo"))
        assert info.signer is not None and info.signer.startswith("cosign:")
        assert other.call("echo", {"a": 1}).ok
    # the signature is cosign's: the simple-signing payload names the digest, ECDSA P-256 over it
    _, document = _sig_manifest(oci_registry, "sig/echo", digest)
    layer = document["layers"][0]
    assert layer["mediaType"] == "application/vnd.dev.cosign.simplesigning.v1+json"
    payload = httpx.get(f"http://{oci_registry.host}/v2/sig/echo/blobs/{layer['digest']}").content
    assert json.loads(payload)["critical"] == {
        "identity": {"docker-reference": f"{oci_registry.host}/sig/echo"},
        "image": {"docker-manifest-digest": digest},
        "type": "cosign container image signature",
    }
    key = serialization.load_pem_public_key(public.read_bytes())
    assert isinstance(key, ec.EllipticCurvePublicKey)
    signature = base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"])
    key.verify(signature, payload, ec.ECDSA(hashes.SHA256()))  # raises when it does not verify


def test_unsigned_is_refused_before_compilation(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("sig/unsigned"))
    with glovebox.Runtime(home=tmp_path / "other", policy=_policy(tmp_path, cosign_keys[1])) as other:
        with pytest.raises(glovebox.SignatureRefused) as caught:
            other.register(oci_registry.ref("sig/unsigned"))
        assert caught.value.code == "signature_refused"
        assert "is not signed" in caught.value.message
        assert other.tools() == []
        assert not any((other.home / "cache" / "compiled").rglob("*.cwasm"))


def test_a_signature_by_another_key_is_refused(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    stranger, _ = generate_oci_keypair("stranger", tmp_path / "stranger")
    echo_runtime.push("echo", oci_registry.ref("sig/stranger"), key=stranger)
    with glovebox.Runtime(home=tmp_path / "other") as other:
        with pytest.raises(glovebox.SignatureRefused, match="not trusted") as caught:
            other.register_oci(oci_registry.ref("sig/stranger"), keys=[str(cosign_keys[1])])
        assert caught.value.code == "signature_refused"


def test_a_signature_for_another_digest_is_refused(
    echo_runtime: glovebox.Runtime,
    oci_registry: OciRegistry,
    cosign_keys: tuple[Path, Path],
    tmp_path: Path,
    build_guest: Callable[[str], Path],
) -> None:
    private, public = cosign_keys
    signed = echo_runtime.push("echo", oci_registry.ref("sig/other", "a"), key=private).rsplit("@", 1)[1]
    echo_runtime.register(build_guest("echo"), manifest={"name": "echo", "version": "2.0.0"})
    other_digest = echo_runtime.push("echo@2.0.0", oci_registry.ref("sig/other", "b")).rsplit("@", 1)[1]
    body, _ = _sig_manifest(oci_registry, "sig/other", signed)
    _put_sig(oci_registry, "sig/other", other_digest, body)  # a valid signature, of the other artifact
    with glovebox.Runtime(home=tmp_path / "other", policy=_policy(tmp_path, public)) as other:
        with pytest.raises(glovebox.SignatureRefused, match="a signature of another artifact") as caught:
            other.register(oci_registry.ref("sig/other", "b"))
        assert caught.value.code == "signature_refused"
        assert caught.value.details["digest"] == other_digest


def test_an_old_signature_replayed_on_a_moved_tag_is_refused(
    echo_runtime: glovebox.Runtime,
    oci_registry: OciRegistry,
    cosign_keys: tuple[Path, Path],
    tmp_path: Path,
    build_guest: Callable[[str], Path],
) -> None:
    private, public = cosign_keys
    old = echo_runtime.push("echo", oci_registry.ref("sig/replay", "stable"), key=private).rsplit("@", 1)[1]
    echo_runtime.register(build_guest("echo"), manifest={"name": "echo", "version": "9.0.0"})
    new = echo_runtime.push("echo@9.0.0", oci_registry.ref("sig/replay", "stable")).rsplit("@", 1)[1]
    body, _ = _sig_manifest(oci_registry, "sig/replay", old)
    _put_sig(oci_registry, "sig/replay", new, body)  # the attacker moved the tag and copied the old signature
    with glovebox.Runtime(home=tmp_path / "other", policy=_policy(tmp_path, public)) as other:
        with pytest.raises(glovebox.SignatureRefused) as caught:
            other.register(oci_registry.ref("sig/replay", "stable"))
        assert caught.value.code == "signature_refused"
        assert old in caught.value.message  # it names the digest the replayed signature is for


def test_require_signatures_with_no_trusted_key_refuses(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("sig/required"), key=cosign_keys[0])
    with glovebox.Runtime(home=tmp_path / "other", require_signatures=True) as other:
        with pytest.raises(glovebox.SignatureRefused, match="no cosign public key is trusted"):
            other.register(oci_registry.ref("sig/required"))
        assert other.register_oci(oci_registry.ref("sig/required"), keys=[str(cosign_keys[1])]).signer


def test_a_policy_entry_covers_only_its_sources(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    echo_runtime.push("echo", oci_registry.ref("open/echo"))
    policy = _policy(tmp_path, cosign_keys[1], source=f"{oci_registry.host}/team/*")
    with glovebox.Runtime(home=tmp_path / "other", policy=policy) as other:
        assert other.register(oci_registry.ref("open/echo")).signer is None


def test_sign_oci_signs_an_artifact_already_pushed(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    from glovebox.oci import sign_reference

    echo_runtime.push("echo", oci_registry.ref("sig/later"))
    pinned, key_id = sign_reference(oci_registry.ref("sig/later"), cosign_keys[0])
    with glovebox.Runtime(home=tmp_path / "other") as other:
        info = other.register_oci(oci_registry.ref("sig/later"), keys=[str(cosign_keys[1])])
        assert info.signer == f"cosign:{key_id}"


def test_verify_checks_without_registering(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    from click.testing import CliRunner

    from glovebox.cli._main import cli

    pinned = echo_runtime.push("echo", oci_registry.ref("sig/verify"), key=cosign_keys[0])
    unsigned = echo_runtime.push("echo", oci_registry.ref("sig/verify-unsigned"))
    with glovebox.Runtime(home=tmp_path / "other") as other:
        assert other.verify_oci(oci_registry.ref("sig/verify"), keys=[str(cosign_keys[1])])[0] == pinned
        with pytest.raises(glovebox.SignatureRefused, match="no cosign public key"):
            other.verify_oci(oci_registry.ref("sig/verify"))
        assert other.tools() == []
    runner = CliRunner()
    home = ["--home", str(tmp_path / "cli")]
    ok = runner.invoke(cli, [*home, "verify", "--oci", unsigned.split("@")[0], "--key", str(cosign_keys[1])])
    assert ok.exit_code == 1 and "signature_refused" in ok.output
    ok = runner.invoke(cli, [*home, "verify", "--oci", oci_registry.ref("sig/verify"), "--key", str(cosign_keys[1])])
    assert ok.exit_code == 0 and ok.output.startswith(f"ok: {pinned} signed by cosign:")


def test_a_second_signature_is_appended_and_either_key_verifies(
    echo_runtime: glovebox.Runtime, oci_registry: OciRegistry, cosign_keys: tuple[Path, Path], tmp_path: Path
) -> None:
    from glovebox.oci import sign_reference

    second, second_pub = generate_oci_keypair("second", tmp_path / "second")
    pinned = echo_runtime.push("echo", oci_registry.ref("sig/two"), key=cosign_keys[0])
    sign_reference(oci_registry.ref("sig/two"), second)
    _, document = _sig_manifest(oci_registry, "sig/two", pinned.rsplit("@", 1)[1])
    assert len(document["layers"]) == 2
    for public in (cosign_keys[1], second_pub):
        with glovebox.Runtime(home=tmp_path / f"home-{public.stem}") as other:
            assert other.register_oci(oci_registry.ref("sig/two"), keys=[str(public)]).signer
