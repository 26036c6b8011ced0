"""The address check against every way IPv6 embeds IPv4, with a recording resolver and transport.

No packet leaves: name resolution answers from a table (IP literals resolve to
themselves, as ``getaddrinfo`` does) and the transport records what it would
have sent. A refused request must never reach it.
"""

from __future__ import annotations

import ipaddress
import socket
import time
from types import SimpleNamespace
from typing import Any

import httpx
import pytest

import glovebox
from glovebox.capabilities._addresses import blocked_reason, embedded_ipv4
from glovebox.capabilities._fetch import HttpCapability
from glovebox.sandbox._callstate import CallState

PUBLIC = "93.184.216.34"

#: (address, reason without allow_private, reason with allow_private)
EMBEDDED = [
    ("::127.0.0.1", "a loopback address (IPv4-compatible, embedding 127.0.0.1)", None),
    (
        "::169.254.169.254",
        "a cloud metadata address (IPv4-compatible, embedding 169.254.169.254)",
        "a cloud metadata address (IPv4-compatible, embedding 169.254.169.254)",
    ),
    ("::8.8.8.8", "a reserved address", None),
    ("::1:2:3:4", "a reserved address", None),
    ("64:ff9b::10.0.0.1", "a private address (NAT64, embedding 10.0.0.1)", None),
    ("64:ff9b::127.0.0.1", "a loopback address (NAT64, embedding 127.0.0.1)", None),
    (
        "64:ff9b::169.254.169.254",
        "a cloud metadata address (NAT64, embedding 169.254.169.254)",
        "a cloud metadata address (NAT64, embedding 169.254.169.254)",
    ),
    ("64:ff9b::224.0.0.1", "a multicast or unspecified address (NAT64, embedding 224.0.0.1)", None),
    ("64:ff9b:1::a00:1", "a private address (NAT64, embedding 10.0.0.1)", None),
    ("64:ff9b:1::8.8.8.8", "a private address", None),
    (
        "64:ff9b:1:a9fe:a9:fe00::",  # the /48 layout: bits 64-71 skipped
        "a cloud metadata address (NAT64, embedding 169.254.169.254)",
        "a cloud metadata address (NAT64, embedding 169.254.169.254)",
    ),
    ("2002:a00:1::1", "a private address (6to4, embedding 10.0.0.1)", None),
    ("2002:7f00:1::", "a loopback address (6to4, embedding 127.0.0.1)", None),
    (
        "2002:a9fe:a9fe::",
        "a cloud metadata address (6to4, embedding 169.254.169.254)",
        "a cloud metadata address (6to4, embedding 169.254.169.254)",
    ),
    ("2002:808:808::1", "a reserved address", None),
    # Teredo: server 65.54.227.120, client 10.0.0.1 / 169.254.169.254 XOR-ed with ones.
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "a private address (Teredo client, embedding 10.0.0.1)", None),
    (
        "2001:0:4136:e378:8000:63bf:5601:5601",
        "a cloud metadata address (Teredo client, embedding 169.254.169.254)",
        "a cloud metadata address (Teredo client, embedding 169.254.169.254)",
    ),
    (
        "2001:0:a9fe:a9fe::1",
        "a cloud metadata address (Teredo server, embedding 169.254.169.254)",
        "a cloud metadata address (Teredo server, embedding 169.254.169.254)",
    ),
    ("::ffff:127.0.0.1", "a loopback address", None),
    ("::ffff:169.254.169.254", "a cloud metadata address", "a cloud metadata address"),
    ("::ffff:0:10.0.0.1", "a private address (IPv4-translated, embedding 10.0.0.1)", None),
    ("::ffff:0:127.0.0.1", "a loopback address (IPv4-translated, embedding 127.0.0.1)", None),
    ("fec0::1", "a reserved address", None),
]


@pytest.mark.parametrize(("address", "reason", "reason_with_private"), EMBEDDED)
def test_embedded_ipv4_is_checked(address: str, reason: str, reason_with_private: str | None) -> None:
    ip = ipaddress.ip_address(address)
    assert blocked_reason(ip, allow_private=False) == reason
    assert blocked_reason(ip, allow_private=True) == reason_with_private


@pytest.mark.parametrize("address", [PUBLIC, "64:ff9b::93.184.216.34", "2606:4700::1111"])
def test_public_addresses_pass(address: str) -> None:
    assert blocked_reason(ipaddress.ip_address(address), allow_private=False) is None


def test_teredo_client_is_unxored() -> None:
    found = dict(embedded_ipv4(ipaddress.ip_address("2001:0:4136:e378:8000:63bf:3fff:fdd2")))
    assert found == {
        "Teredo server": ipaddress.ip_address("65.54.227.120"),
        "Teredo client": ipaddress.ip_address("192.0.2.45"),
    }


# -- through the capability: resolver answers and IP literals ------------------------------------


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Fake DNS: host -> addresses; an IP literal resolves to itself."""
    table: dict[str, list[str]] = {}

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        addresses = table.get(host) or [str(ipaddress.ip_address(host))]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return table


def _fetch(host: str, url: str, sent: list[httpx.Request], **rule: Any) -> tuple[Any, CallState]:
    http_rule = glovebox.HttpRule(host=host, paths=["/**"], **rule)
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200))
    capability = HttpCapability([http_rule], glovebox.Grants(http=[http_rule]), transport=transport)
    state = CallState(deadline=time.monotonic() + 5, log_limit_bytes=0)
    request = SimpleNamespace(method="GET", url=url, headers=[], body=None)
    try:
        return capability.fetch(request, state), state
    finally:
        capability.close()


@pytest.mark.parametrize(("address", "reason", "reason_with_private"), EMBEDDED)
def test_resolver_answers_embedding_ipv4_never_reach_the_transport(
    dns: dict[str, list[str]], address: str, reason: str, reason_with_private: str | None
) -> None:
    dns["api.example.com"] = [address]
    sent: list[httpx.Request] = []
    result, state = _fetch("api.example.com", "https://api.example.com/x", sent)
    shown = str(ipaddress.ip_address(address))
    expected = f"host api.example.com resolves to {shown}, {reason}"
    if not reason.startswith(("a cloud", "a multicast")):
        expected += "; not granted"
    assert (result.tag, result.payload) == ("denied", expected)
    assert state.denials == [
        {"capability": "http", "method": "GET", "url": "https://api.example.com/x", "reason": expected}
    ]
    assert sent == []


@pytest.mark.parametrize(
    ("literal", "reason"),
    [
        ("::127.0.0.1", "a loopback address (IPv4-compatible, embedding 127.0.0.1); not granted"),
        ("64:ff9b::a9fe:a9fe", "a cloud metadata address (NAT64, embedding 169.254.169.254)"),
        ("2002:a00:1::1", "a private address (6to4, embedding 10.0.0.1); not granted"),
        ("::ffff:0:a00:1", "a private address (IPv4-translated, embedding 10.0.0.1); not granted"),
    ],
)
def test_ip_literals_get_the_same_check(dns: dict[str, list[str]], literal: str, reason: str) -> None:
    sent: list[httpx.Request] = []
    result, _ = _fetch(literal, f"https://[{literal}]/x", sent)
    shown = str(ipaddress.ip_address(literal))
    assert (result.tag, result.payload) == ("denied", f"host {shown} resolves to {shown}, {reason}")
    assert sent == []


def test_metadata_embedded_stays_refused_with_allow_private(dns: dict[str, list[str]]) -> None:
    dns["api.example.com"] = ["2002:a9fe:a9fe::1"]
    sent: list[httpx.Request] = []
    result, _ = _fetch("api.example.com", "https://api.example.com/x", sent, allow_private=True)
    assert result.payload == (
        "host api.example.com resolves to 2002:a9fe:a9fe::1, a cloud metadata address (6to4, embedding 169.254.169.254)"
    )
    assert sent == []


def test_a_nat64_address_of_a_public_host_is_connected_to(dns: dict[str, list[str]]) -> None:
    dns["api.example.com"] = ["64:ff9b::5db8:d822"]
    sent: list[httpx.Request] = []
    result, state = _fetch("api.example.com", "https://api.example.com/x", sent)
    assert result.status == 200
    assert [request.url.host for request in sent] == ["64:ff9b::5db8:d822"]
    assert state.denials == []
