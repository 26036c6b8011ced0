"""Registry logins against real registries: Basic (htpasswd) and Bearer (a token service), the
credentials from docker's config.json or the environment, never sent to another host."""

from __future__ import annotations

import base64
import datetime
import http.server
import json
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

import glovebox

from ..ociregistry import OciRegistry, htpasswd_line, registry_binary, start_registry

pytestmark = pytest.mark.system
pytest.importorskip("bcrypt", reason="bcrypt is not installed (the dev extra installs it)")
USER, PASSWORD = "publisher", "s3cret-" + "x" * 8


@pytest.fixture(scope="module")
def basic_registry() -> Iterator[OciRegistry]:
    binary = registry_binary()
    if binary is None:
        pytest.skip("no OCI registry binary (Debian's docker-registry; make test installs it)")
    server = start_registry(binary, htpasswd=htpasswd_line(USER, PASSWORD))
    yield server
    server.stop()


def _docker_config(tmp_path: Path, host: str, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "docker-config"
    config.mkdir(exist_ok=True)
    auth = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    (config / "config.json").write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(config))


def test_basic_login_from_docker_config(
    echo_runtime: glovebox.Runtime, basic_registry: OciRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _docker_config(tmp_path, basic_registry.host, monkeypatch)
    echo_runtime.push("echo", basic_registry.ref("private/echo"))
    with glovebox.Runtime(home=tmp_path / "other") as other:
        assert other.register(basic_registry.ref("private/echo")).name == "echo"


def test_no_login_is_a_registry_error_naming_where_logins_come_from(
    echo_runtime: glovebox.Runtime, basic_registry: OciRegistry
) -> None:
    with pytest.raises(glovebox.RegistryError, match="no credentials are configured") as caught:
        echo_runtime.push("echo", basic_registry.ref("private/anon"))
    assert caught.value.details["status"] == 401


def test_a_wrong_password_is_refused(
    echo_runtime: glovebox.Runtime, basic_registry: OciRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLOVEBOX_OCI_USERNAME", USER)
    monkeypatch.setenv("GLOVEBOX_OCI_PASSWORD", "wrong")
    monkeypatch.setenv("GLOVEBOX_OCI_HOST", basic_registry.host)
    with pytest.raises(glovebox.RegistryError) as caught:
        echo_runtime.push("echo", basic_registry.ref("private/wrong"))
    assert caught.value.details["status"] == 401


def test_login_from_the_environment_and_a_secret_file_only_for_its_host(
    echo_runtime: glovebox.Runtime, basic_registry: OciRegistry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "registry-password"
    secret.write_text(PASSWORD + "\n")
    monkeypatch.setenv("GLOVEBOX_OCI_USERNAME", USER)
    monkeypatch.setenv("GLOVEBOX_OCI_PASSWORD_FILE", str(secret))
    monkeypatch.setenv("GLOVEBOX_OCI_HOST", "registry.example.com")  # another host: not sent
    with pytest.raises(glovebox.RegistryError, match="no credentials"):
        echo_runtime.push("echo", basic_registry.ref("private/env"))
    monkeypatch.setenv("GLOVEBOX_OCI_HOST", basic_registry.host)
    assert echo_runtime.push("echo", basic_registry.ref("private/env")).startswith("oci://")


# -- Bearer: a token service issuing ES256 JWTs the registry verifies against our certificate ----------


class TokenService:
    """Issues a registry token for the scope asked, to the one user, as docker's token spec says."""

    def __init__(self, root: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "glovebox-test-token-issuer")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip
        self.bundle = root / "token-root.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.asked: list[dict[str, object]] = []

    def token(self, scope: str, user: str) -> str:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        def b64(data: bytes) -> str:
            return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

        der = self.cert.public_bytes(serialization.Encoding.DER)
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(der).decode()]}
        _, name, actions = scope.split(":")
        now = int(time.time())
        claims = {
            "iss": "glovebox-test", "sub": user, "aud": "glovebox-registry", "exp": now + 300, "nbf": now - 10,
            "iat": now, "jti": secrets.token_hex(8),
            "access": [{"type": "repository", "name": name, "actions": actions.split(",")}],
        }  # fmt: skip
        signing_input = f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"


@pytest.fixture(scope="module")
def token_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[OciRegistry, TokenService]]:
    binary = registry_binary()
    if binary is None:
        pytest.skip("no OCI registry binary (Debian's docker-registry; make test installs it)")
    service = TokenService(tmp_path_factory.mktemp("token"))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            query = parse_qs(urlsplit(self.path).query)
            login = base64.b64decode(self.headers.get("Authorization", "Basic ")[6:] or b"").decode()
            service.asked.append({"scope": query.get("scope", [""])[0], "login": login})
            if login != f"{USER}:{PASSWORD}":
                self.send_response(401)
                self.end_headers()
                return
            body = json.dumps({"token": service.token(query["scope"][0], USER)}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    http_server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=http_server.serve_forever, daemon=True).start()
    realm = f"http://127.0.0.1:{http_server.server_address[1]}/token"
    settings = {"realm": realm, "service": "glovebox-registry", "issuer": "glovebox-test",
                "rootcertbundle": str(service.bundle)}  # fmt: skip
    registry = start_registry(binary, token=settings)
    yield registry, service
    registry.stop()
    http_server.shutdown()
    http_server.server_close()


def test_bearer_token_login(
    echo_runtime: glovebox.Runtime,
    token_registry: tuple[OciRegistry, TokenService],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    registry, service = token_registry
    _docker_config(tmp_path, registry.host, monkeypatch)
    echo_runtime.push("echo", registry.ref("team/echo"))
    assert {"scope": "repository:team/echo:pull,push", "login": f"{USER}:{PASSWORD}"} in service.asked
    with glovebox.Runtime(home=tmp_path / "other") as other:
        assert other.register(registry.ref("team/echo")).name == "echo"
    assert {"scope": "repository:team/echo:pull", "login": f"{USER}:{PASSWORD}"} in service.asked


def test_bearer_token_refused_without_credentials(
    echo_runtime: glovebox.Runtime, token_registry: tuple[OciRegistry, TokenService]
) -> None:
    registry, _ = token_registry
    with pytest.raises(glovebox.RegistryError, match="refused a token") as caught:
        echo_runtime.push("echo", registry.ref("team/anon"))
    assert caught.value.details["status"] == 401
