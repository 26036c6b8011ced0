"""Hostile tools aim real calls at addresses and paths the grant must not reach.

Real guests (``tests/guests/http_client.c``, the weather example) run in a real
Runtime; the network under them is fake so that no packet leaves even if a
check fails: names resolve from a table (IP literals to themselves, as
``getaddrinfo`` does) and the HTTP exchange (the capability's wire, and httpx's
transport) records what it would have sent and answers 200. Each attack asserts what the guest got, the call's outcome,
``meta.denials``, the audit row, and that nothing reached the transport.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.capabilities import _wire

BuildGuest = Callable[[str], Path]
WEATHER = Path(__file__).parents[2] / "guest/examples/weather/glovebox.toml"


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Fake DNS (``names``) and a transport that records (``sent``) instead of sending."""
    fake: dict[str, Any] = {"names": {}, "sent": []}

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        addresses = fake["names"].get(host) or [str(ipaddress.ip_address(host))]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses
        ]

    answer = {"current_weather": {"temperature": 1.0, "windspeed": 2.0}}

    def handle_request(self: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        fake["sent"].append(request)
        return httpx.Response(200, json=answer)

    def send(self: _wire.Wire, scheme: str, address: str, port: int, *request: Any) -> _wire.Response:
        _server_name, method, target, headers, body = request
        host = f"[{address}]" if ":" in address else address
        url = f"{scheme}://{host}:{port}{target.decode()}"
        fake["sent"].append(httpx.Request(method, url, headers=headers, content=body))
        data = json.dumps(answer).encode()
        headers = [("content-type", "application/json"), ("content-length", str(len(data)))]
        return _wire.Response(200, headers, lambda: iter([data]), lambda: None)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(httpx.HTTPTransport, "handle_request", handle_request)
    monkeypatch.setattr(_wire.Wire, "send", send)
    return fake


def _call(home: Path, wasm: Path, manifest: dict[str, Any], rule: dict[str, Any], value: Any) -> glovebox.CallResult:
    manifest["capabilities"] = {"http": [rule]}
    with glovebox.Runtime(home=home, grants={"http": [rule]}) as rt:
        rt.register(wasm, manifest=manifest)
        result = rt.call(manifest["name"], value)
        record = rt.audit.find(result.meta["call_id"])
    assert record is not None
    audited = json.loads(record["egress"])  # the audit row says what meta says
    assert audited["denials"] == result.meta.get("denials", [])
    assert audited["http"] == result.meta["egress"]
    return result


def http_client(home: Path, build_guest: BuildGuest, rule: dict[str, Any], url: str) -> glovebox.CallResult:
    return _call(home, build_guest("http_client"), {"name": "hc"}, rule, {"method": "GET", "url": url})


def weather(home: Path, build_example: BuildGuest, rule: dict[str, Any], api: str) -> glovebox.CallResult:
    manifest = tomllib.loads(WEATHER.read_text())
    return _call(home, build_example("weather"), manifest, rule, {"latitude": 1, "longitude": 2, "api": api})


def _rule(host: str, **extra: Any) -> dict[str, Any]:
    return {"host": host, "paths": ["/**"], **extra}


def assert_guest_denied(result: glovebox.CallResult, url: str, reason: str) -> None:
    assert result.ok, result.to_dict()
    assert result.output == {"status": "denied", "reason": reason}
    assert result.meta["denials"] == [{"capability": "http", "method": "GET", "url": url, "reason": reason}]
    assert result.meta["egress"][0]["error"] == "denied"


def test_the_fake_network_records_a_granted_request(
    _isolated_env: Path, build_guest: BuildGuest, network: dict[str, Any]
) -> None:
    network["names"]["api.example.com"] = ["64:ff9b::5db8:d822"]  # NAT64 of a public address
    result = _call(
        _isolated_env,
        build_guest("http_client"),
        {"name": "hc"},
        _rule("api.example.com"),
        {"method": "GET", "url": "https://api.example.com/users/1"},
    )
    assert result.output["status"] == "ok"
    [request] = network["sent"]
    assert (request.url.host, request.url.path) == ("64:ff9b::5db8:d822", "/users/1")


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("64:ff9b::a9fe:a9fe", "a cloud metadata address (NAT64, embedding 169.254.169.254)"),
        ("::a9fe:a9fe", "a cloud metadata address (IPv4-compatible, embedding 169.254.169.254)"),
        ("2002:a00:1::1", "a private address (6to4, embedding 10.0.0.1); not granted"),
        (
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "a loopback address (Teredo client, embedding 127.0.0.1); not granted",
        ),
        ("::ffff:0:a00:1", "a private address (IPv4-translated, embedding 10.0.0.1); not granted"),
    ],
)
def test_a_name_resolving_to_an_embedded_address_is_denied(
    _isolated_env: Path, build_guest: BuildGuest, network: dict[str, Any], address: str, reason: str
) -> None:
    network["names"]["api.example.com"] = [address]
    url = "https://api.example.com/users/1"
    result = http_client(_isolated_env, build_guest, _rule("api.example.com"), url)
    assert_guest_denied(result, url, f"host api.example.com resolves to {address}, {reason}")
    assert network["sent"] == []


def test_an_embedded_ip_literal_is_denied(
    _isolated_env: Path, build_guest: BuildGuest, network: dict[str, Any]
) -> None:
    url = "https://[::7f00:1]/users/1"
    result = http_client(_isolated_env, build_guest, _rule("::127.0.0.1"), url)
    reason = (
        "host ::7f00:1 resolves to ::7f00:1, a loopback address (IPv4-compatible, embedding 127.0.0.1); not granted"
    )
    assert_guest_denied(result, url, reason)
    assert network["sent"] == []


def test_a_tool_failing_after_an_embedded_metadata_address_is_capability_denied(
    _isolated_env: Path, build_example: BuildGuest, network: dict[str, Any]
) -> None:
    rule = _rule("64:ff9b::a9fe:a9fe", schemes=["http"], allow_private=True)
    result = weather(_isolated_env, build_example, rule, "http://[64:ff9b::a9fe:a9fe]")
    assert result.code == "capability_denied", result.to_dict()
    assert result.error is not None
    [denial] = result.error.details["denials"]
    assert denial["reason"] == (
        "host 64:ff9b::a9fe:a9fe resolves to 64:ff9b::a9fe:a9fe, "
        "a cloud metadata address (NAT64, embedding 169.254.169.254)"
    )
    assert "weather API unreachable (denied)" in result.error.details["guest_message"]
    assert network["sent"] == []


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/users/..;/admin", "path /users/..;/admin has dot segments"),
        ("/users/%252e%252e/admin", "path /users/%252e%252e/admin has dot segments twice decoded"),
        ("/users/%2e%2e;/admin", "path /users/%2e%2e;/admin has dot segments once decoded"),
        ("/users/1%2500", "path /users/1%2500 has an encoded control character"),
        (
            "/users/1;jsessionid=x",
            "path /users/1;jsessionid=x has ';' parameters (allow_path_params is off) (declared)",
        ),
        (
            "/users/a%252fb",
            "path /users/a%252fb has a percent-encoded '.', '/' or '\\' (allow_encoded_separators is off) (declared)",
        ),
    ],
)
def test_paths_a_server_reads_differently_are_denied(
    _isolated_env: Path, build_guest: BuildGuest, network: dict[str, Any], path: str, reason: str
) -> None:
    network["names"]["api.example.com"] = ["93.184.216.34"]
    url = f"https://api.example.com{path}"
    result = http_client(_isolated_env, build_guest, _rule("api.example.com", paths=["/users/**"]), url)
    assert_guest_denied(result, url, reason)
    assert network["sent"] == []


def test_a_tool_failing_after_a_dot_dot_semicolon_path_is_capability_denied(
    _isolated_env: Path, build_example: BuildGuest, network: dict[str, Any]
) -> None:
    network["names"]["api.example.com"] = ["93.184.216.34"]
    rule = _rule("api.example.com", paths=["/users/**"])
    result = weather(_isolated_env, build_example, rule, "https://api.example.com/users/..;")
    assert result.code == "capability_denied", result.to_dict()
    assert result.error is not None
    [denial] = result.error.details["denials"]
    assert denial["reason"] == "path /users/..;/v1/forecast has dot segments"
    assert network["sent"] == []


def test_a_rule_allowing_params_lets_them_through(
    _isolated_env: Path, build_guest: BuildGuest, network: dict[str, Any]
) -> None:
    network["names"]["api.example.com"] = ["93.184.216.34"]
    rule = _rule("api.example.com", paths=["/users/*"], allow_path_params=True)
    result = http_client(_isolated_env, build_guest, rule, "https://api.example.com/users/1;v=2")
    assert result.output["status"] == "ok", result.output
    [request] = network["sent"]
    assert request.url.raw_path == b"/users/1;v=2"
