"""Fuzzing the HTTP grant check against a reference built on ``urllib.parse`` and ``ipaddress``.

Generated URLs go through the real capability with a recording resolver and
transport (nothing is sent). The properties: ``fetch`` never raises and only
documented refusals come out; nothing the reference calls non-public —
the address itself or any IPv4 address it embeds — reaches the transport;
what reaches it names the granted host and a path that stays inside the grant
however a server decodes it.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import glovebox
from glovebox.capabilities._fetch import HttpCapability
from glovebox.model._rules import host_matches
from glovebox.sandbox._callstate import CallState

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
HOST = "api.example.com"
MASK32 = 0xFFFFFFFF

# -- the reference ------------------------------------------------------------------------------

METADATA = {"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254"}


def _within(value: int, prefix: int, length: int) -> bool:
    return value >> (128 - length) == prefix >> (128 - length)


def reference_embedded(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """Every IPv4 address an IPv6 address may stand for, read with plain bit arithmetic."""
    n, found = int(address), []
    if n >> 32 in (0, 0xFFFF, 0xFFFF0000) or _within(n, 0x64FF9B << 96, 96):  # compatible, mapped, translated, NAT64
        found.append(n & MASK32)
    if _within(n, (0x64FF9B << 96) | (1 << 80), 48):  # local NAT64, RFC 6052 layouts (bits 64-71 skipped)
        no_u = ((n >> 72) << 64) | (n & ((1 << 64) - 1))
        found += [(no_u >> (88 - 8 * i)) & MASK32 for i in range(3)] + [n & MASK32]
    if _within(n, 0x2002 << 112, 16):
        found.append((n >> 80) & MASK32)
    if _within(n, 0x20010000 << 96, 32):
        found += [(n >> 64) & MASK32, ~n & MASK32]
    return [ipaddress.IPv4Address(v) for v in found]


def reference_is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """What any version of ``ipaddress`` agrees is a public unicast address, embedded IPv4 included."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = reference_embedded(address)
        if not all(reference_is_public(v4) for v4 in embedded):
            return False
        if embedded and (address.ipv4_mapped or _within(int(address), 0x64FF9B << 96, 96)):
            return True  # the IPv4 address is the destination
        if address.is_site_local:
            return False
    return (
        address.is_global
        and not (address.is_reserved or address.is_multicast or address.is_loopback or address.is_link_local)
        and str(address) not in METADATA
        and address not in ipaddress.ip_network("100.64.0.0/10")
    )


def reference_is_metadata(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    embedded = reference_embedded(address) if isinstance(address, ipaddress.IPv6Address) else []
    return any(str(a) in METADATA for a in [address, *embedded])


def decodings(path: str) -> Iterator[str]:
    """``path`` as sent and percent-decoded up to three times."""
    for _ in range(4):
        yield path
        path = unquote(path)


def reference_stays_under(prefix: str, path: str) -> bool:
    """Whether every server reading of ``path`` (decoded, ``\\`` as ``/``, ``;`` params cut) stays under ``prefix``."""
    for text in decodings(path):
        if re.search(r"[\x00-\x1f\x7f]", text):
            return False
        segments = [segment.split(";")[0].strip() for segment in text.replace("\\", "/").split("/")]
        normal = posixpath.normpath("/".join(segments))
        if normal != prefix and not normal.startswith(prefix + "/"):
            return False
    return True


# -- the capability under test ----------------------------------------------------------------


@pytest.fixture
def network(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A resolver answering from ``names`` (IP literals resolve to themselves) and a transport recording ``sent``."""
    fake: dict[str, Any] = {"names": {}, "sent": []}

    def getaddrinfo(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        try:
            addresses = fake["names"].get(host) or [str(ipaddress.ip_address(host))]
        except ValueError:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return fake


def fetch(network: dict[str, Any], url: str, **rule: Any) -> tuple[Any, list[httpx.Request]]:
    """One request through a fresh capability whose only rule (declared and granted) is ``rule``."""
    sent: list[httpx.Request] = []
    network["sent"] = sent
    http_rule = glovebox.HttpRule(**{"host": HOST, "schemes": ["https", "http"], "paths": ["/**"], **rule})
    transport = httpx.MockTransport(lambda request: sent.append(request) or httpx.Response(200))
    capability = HttpCapability([http_rule], glovebox.Grants(http=[http_rule]), transport=transport)
    state = CallState(deadline=time.monotonic() + 5, log_limit_bytes=0)
    try:
        result = capability.fetch(SimpleNamespace(method="GET", url=url, headers=[], body=None), state)
    finally:
        capability.close()
    event("reached the transport" if sent else f"refused ({result.tag})")
    if sent:
        assert result.status == 200 and len(sent) == 1
    else:
        assert result.tag in ("denied", "network") and result.payload, result
        assert (result.tag == "denied") == bool(state.denials)
    return result, sent


# -- addresses ------------------------------------------------------------------------------------

SPECIAL_V4 = [
    *METADATA - {"fd00:ec2::254"},
    "127.0.0.1",
    "127.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "192.168.1.1",
    "100.64.0.1",
    "169.254.1.1",
    "0.0.0.0",
    "0.1.2.3",
    "224.0.0.1",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.1",
    "198.18.0.1",
    "8.8.8.8",
    "93.184.216.34",
]
ipv4 = st.one_of(st.sampled_from(SPECIAL_V4).map(lambda a: int(ipaddress.IPv4Address(a))), st.integers(0, MASK32))
bits = st.integers(0, (1 << 80) - 1)


def _nat64_local(v4: int, layout: int, rest: int) -> int:
    """``v4`` in 64:ff9b:1::/48 at the RFC 6052 layout for a /48, /56, /64 or /96 prefix."""
    if layout == 96:
        return (0x64FF9B << 96) | (1 << 80) | (rest & ((1 << 48) - 1)) << 32 | v4
    start = layout // 8 - 6  # bytes into the 80 bits after the /48 prefix, before the u octet is added
    no_u = (rest & ((1 << 72) - 1)) & ~(MASK32 << (72 - 8 * start - 32)) | v4 << (72 - 8 * start - 32)
    return (0x64FF9B << 96) | (1 << 80) | ((no_u >> 64) << 72) | (no_u & ((1 << 64) - 1))


embedded_v6 = st.one_of(
    ipv4.map(lambda v: 0xFFFF << 32 | v),  # IPv4-mapped
    ipv4.map(lambda v: 0xFFFF0000 << 32 | v),  # IPv4-translated
    ipv4.map(lambda v: v),  # IPv4-compatible
    st.builds(lambda v, r: (r & ((1 << 88) - 1)) << 32 | v, ipv4, bits),  # the rest of ::/8
    ipv4.map(lambda v: 0x64FF9B << 96 | v),  # NAT64
    st.builds(_nat64_local, ipv4, st.sampled_from([48, 56, 64, 96]), bits),
    st.builds(lambda v, r: 0x2002 << 112 | v << 80 | (r & ((1 << 80) - 1)), ipv4, bits),  # 6to4
    st.builds(lambda s, c, r: 0x20010000 << 96 | s << 64 | (r & 0xFFFFFFFF) << 32 | (~c & MASK32), ipv4, ipv4, bits),
    st.integers(0, (1 << 128) - 1),
)
address = st.one_of(ipv4.map(ipaddress.IPv4Address), embedded_v6.map(ipaddress.IPv6Address))


@FUZZ
@given(address=address, allow_private=st.booleans())
def test_resolved_addresses_reach_the_transport_only_when_the_reference_allows(
    network: dict[str, Any], address: ipaddress.IPv4Address | ipaddress.IPv6Address, allow_private: bool
) -> None:
    network["names"][HOST] = [str(address)]
    result, sent = fetch(network, f"https://{HOST}/x", allow_private=allow_private)
    if sent:
        assert ipaddress.ip_address(sent[0].url.host) == address
        assert reference_is_public(address) or (allow_private and not reference_is_metadata(address))
    else:
        assert result.payload.startswith(f"host {HOST} resolves to {address}, a")


@FUZZ
@given(address=embedded_v6.map(ipaddress.IPv6Address), allow_private=st.booleans())
def test_ip_literals_reach_the_transport_only_when_the_reference_allows(
    network: dict[str, Any], address: ipaddress.IPv6Address, allow_private: bool
) -> None:
    result, sent = fetch(network, f"http://[{address}]/x", host=str(address), allow_private=allow_private)
    if sent:
        assert reference_is_public(address) or (allow_private and not reference_is_metadata(address))
    else:
        assert result.tag == "denied"
        assert result.payload.startswith(f"host {address} resolves to {address}, a")


# -- paths ----------------------------------------------------------------------------------------

PATH_TOKENS = [
    "a", "users", "admin", ".", "..", "...", "/", "\\", ";", ";x=1", "..;", ".;", "%", "%25", "%2e", "%2E",
    "%2f", "%2F", "%5c", "%252e", "%252f", "%25252e", "%3b", "%00", "%0a", "%2500", "%7f", "%c0%ae", "%c0%af",
    "%20", "~", "%41", "é", "?", "#", "%3f",
]  # fmt: skip
DOCUMENTED_PATH_REFUSALS = re.compile(
    r"^path .* has (dot segments( once decoded| twice decoded| decoded \d times)?|a backslash"
    r"|an encoded control character|percent-encoding nested 8 times or more)$"
    r"|^path .* has ';' parameters \(allow_path_params is off\) \(declared\)$"
    r"|^path .* has a percent-encoded '\.', '/' or '\\' \(allow_encoded_separators is off\) \(declared\)$"
    r"|^path .* not allowed for api\.example\.com \(declared: /users/\*\*\)$"
    r"|^URL contains whitespace or control characters$"
)


@FUZZ
@given(
    tail=st.lists(st.sampled_from(PATH_TOKENS), max_size=8).map("".join),
    params=st.booleans(),
    encoded=st.booleans(),
)
def test_paths_reaching_the_transport_stay_inside_the_grant(
    network: dict[str, Any], tail: str, params: bool, encoded: bool
) -> None:
    network["names"][HOST] = ["93.184.216.34"]
    url = f"https://{HOST}/users/{tail}"
    flags = {"allow_path_params": params, "allow_encoded_separators": encoded}
    result, sent = fetch(network, url, paths=["/users/**"], **flags)
    if not sent:
        assert result.tag == "denied"
        assert DOCUMENTED_PATH_REFUSALS.match(result.payload), result.payload
        return
    path = sent[0].url.raw_path.decode("ascii").split("?")[0]
    assert reference_stays_under("/users", path), path
    assert params or ";" not in path
    assert encoded or not any(re.search(r"%(2e|2f|5c)", text, re.I) for text in list(decodings(path))[:2])


# -- hosts ----------------------------------------------------------------------------------------

AUTHORITY_TOKENS = [
    HOST, "API.Example.COM", "evil.com", ".", "@", ":", ":443", ":80", "#", "?", "/", "\\", "[", "]", "%40",
    "%2e", "user", "%00", "..", "api", "example.com", "*", " ", "\t",
]  # fmt: skip


@FUZZ
@given(
    authority=st.tuples(
        st.sampled_from(["", HOST, "evil.com", "user@"]),
        st.lists(st.sampled_from(AUTHORITY_TOKENS), max_size=5).map("".join),
        st.sampled_from(["", HOST, ":443"]),
    ).map("".join)
)
def test_only_the_granted_host_is_reached(network: dict[str, Any], authority: str) -> None:
    network["names"].update(
        {HOST: ["93.184.216.34"], "evil.com": ["198.51.100.7"], "api.example.com.": ["93.184.216.34"]}
    )
    url = f"https://{authority}/x"
    result, sent = fetch(network, url)
    if not sent:
        return
    parts = urlsplit(url)
    assert (parts.hostname or "").rstrip(".") == HOST  # what urllib reads as the host is the granted one
    assert sent[0].url.host == "93.184.216.34"
    assert sent[0].headers["host"] == HOST if parts.port in (None, 443) else f"{HOST}:{parts.port}"


host_names = st.lists(st.sampled_from(["a", "b", "example", "com", "evil", "api", "x-y", "0"]), min_size=1, max_size=4)


@FUZZ
@given(labels=host_names, suffix=host_names, wildcard=st.booleans(), trailing_dot=st.booleans())
def test_host_patterns_match_like_the_reference(
    labels: list[str], suffix: list[str], wildcard: bool, trailing_dot: bool
) -> None:
    if wildcard and len(suffix) < 2:
        suffix = [*suffix, "com"]
    pattern = ("*." if wildcard else "") + ".".join(suffix)
    host = ".".join(labels) + ("." if trailing_dot else "")
    name = host.lower().rstrip(".")
    expected = name.endswith("." + ".".join(suffix)) if wildcard else name == ".".join(suffix)
    assert host_matches(pattern, host) is expected
