"""Which addresses the HTTP capability may connect to (the SSRF address check).

An IPv6 address can carry an IPv4 address that the packet really goes to (or
that a translator, relay or tunnel turns it into), so every such embedding is
unwrapped and the IPv4 address checked as well as the IPv6 one:

>>> blocked_reason(ipaddress.ip_address("64:ff9b::169.254.169.254"), allow_private=True)
'a cloud metadata address (NAT64, embedding 169.254.169.254)'
>>> blocked_reason(ipaddress.ip_address("::127.0.0.1"), allow_private=False)
'a loopback address (IPv4-compatible, embedding 127.0.0.1)'
>>> blocked_reason(ipaddress.ip_address("64:ff9b::10.0.0.1"), allow_private=False)
'a private address (NAT64, embedding 10.0.0.1)'
>>> blocked_reason(ipaddress.ip_address("64:ff9b::93.184.216.34"), allow_private=False) is None
True
>>> blocked_reason(ipaddress.ip_address("169.254.169.254"), allow_private=True)
'a cloud metadata address'
>>> blocked_reason(ipaddress.ip_address("93.184.216.34"), allow_private=False) is None
True

IPv4-mapped addresses (``::ffff:a.b.c.d``) are the IPv4 address itself and are
judged as such:

>>> blocked_reason(ipaddress.ip_address("::ffff:10.0.0.1"), allow_private=False)
'a private address'
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

__all__ = ["IPAddress", "blocked_reason", "embedded_ipv4"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_V4, _NET = ipaddress.IPv4Address, ipaddress.ip_network

_METADATA = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
_SHARED = ipaddress.ip_network("100.64.0.0/10")
_ULA = ipaddress.ip_network("fc00::/7")
_MAPPED = _NET("::ffff:0:0/96")
_TRANSLATED = _NET("::ffff:0:0:0/96")
_COMPATIBLE = _NET("::/96")
_NAT64 = _NET("64:ff9b::/96")
_NAT64_LOCAL = _NET("64:ff9b:1::/48")
_SIX_TO_FOUR = _NET("2002::/16")
_TEREDO = _NET("2001::/32")
#: Embedding ranges refused unless allow_private even when the IPv4 address they embed is public.
_NOT_PUBLIC = (
    (_TRANSLATED, "a reserved address"),
    (_NAT64_LOCAL, "a private address"),
    (_SIX_TO_FOUR, "a reserved address"),
)


def embedded_ipv4(address: IPAddress) -> Iterator[tuple[str, ipaddress.IPv4Address]]:
    """Every IPv4 address an IPv6 address embeds, with the embedding's name.

    >>> list(embedded_ipv4(ipaddress.ip_address("2002:a00:1::1")))
    [('6to4', IPv4Address('10.0.0.1'))]
    >>> [str(a) for _, a in embedded_ipv4(ipaddress.ip_address("2001:0:4136:e378:8000:63bf:f5ff:fffe"))]
    ['65.54.227.120', '10.0.0.1']
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return
    low = _V4(address.packed[12:])
    if address in _MAPPED:
        yield "IPv4-mapped", low
    elif address in _TRANSLATED:
        yield "IPv4-translated", low
    elif address in _COMPATIBLE and int(address) > 1:
        yield "IPv4-compatible", low
    elif address in _NAT64:
        yield "NAT64", low
    elif address in _NAT64_LOCAL:
        # RFC 6052: the IPv4 address ends a /96 prefix, or follows a /48, /56 or /64 one skipping bits 64-71.
        yield "NAT64", low
        without_u = address.packed[:8] + address.packed[9:]
        for start in (6, 7, 8):
            yield "NAT64", _V4(without_u[start : start + 4])
    elif address in _SIX_TO_FOUR:
        yield "6to4", _V4(address.packed[2:6])
    elif address in _TEREDO:
        yield "Teredo server", _V4(address.packed[4:8])
        yield "Teredo client", _V4(bytes(b ^ 0xFF for b in address.packed[12:]))


def blocked_reason(address: IPAddress, allow_private: bool) -> str | None:
    """Why a connection to ``address`` is refused, or None when it is allowed.

    Cloud-metadata, multicast and unspecified addresses, and IPv6 addresses
    embedding a cloud-metadata address, are always refused; loopback,
    link-local, private and reserved ones (or embedding one) unless
    ``allow_private``. An embedded address that decides is named in the reason.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    embedded = list(embedded_ipv4(address))
    if address in _METADATA:
        return "a cloud metadata address"
    if address.is_multicast or address.is_unspecified:
        return "a multicast or unspecified address"
    for kind, candidate in embedded:
        if candidate in _METADATA:
            return f"a cloud metadata address ({kind}, embedding {candidate})"
    if allow_private:
        return None
    for kind, candidate in dict(reversed(embedded)).items():  # where a kind has several layouts, the usual one
        reason = _non_public(candidate)
        if reason is not None:
            return f"{reason} ({kind}, embedding {candidate})"
    return _outer(address)


def _outer(address: IPAddress) -> str | None:
    """The verdict on the address itself once its embedded IPv4 passed."""
    if isinstance(address, ipaddress.IPv6Address):
        if address in _NAT64:
            return None  # DNS64 answers: the embedded (public) IPv4 address is the destination
        for network, label in _NOT_PUBLIC:
            if address in network:
                return label
    return _non_public(address)


def _non_public(address: IPAddress) -> str | None:
    """None for a public address, else what kind of non-public address it is."""
    site_local = isinstance(address, ipaddress.IPv6Address) and address.is_site_local
    if address.is_global and not (address.is_reserved or site_local or address in _SHARED or address in _ULA):
        if not (address.is_multicast or address.is_unspecified):
            return None
    for label, test in (
        ("a multicast or unspecified address", address.is_multicast or address.is_unspecified),
        ("a loopback address", address.is_loopback),
        ("a link-local address", address.is_link_local),
        ("a private address", address.is_private or address in _SHARED or address in _ULA),
    ):
        if test:
            return label
    return "a reserved address"
