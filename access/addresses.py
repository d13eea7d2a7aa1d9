"""Which network addresses the agent's fetches may reach: the one SSRF guard every URL fetch uses.

`web_fetch` (agents/tools/community) and the browser's egress proxy resolve a host once with
`resolve_public` and connect only to the addresses it returned, so the check and the connection
see the same addresses (no second lookup a rebinding DNS server could answer differently).

Python's `ipaddress.is_global` alone is not enough: it calls NAT64 (`64:ff9b::a9fe:a9fe`), 6to4
(`2002:a9fe:a9fe::`), IPv4-compatible (`::a9fe:a9fe`) and SIIT (`::ffff:0:a9fe:a9fe`) forms of
the cloud metadata address global, and some cloud metadata services sit on addresses it calls
global (Oracle's 192.0.0.192, Azure's 168.63.129.16). Here every IPv6 address that carries an
IPv4 one is judged by the IPv4 it carries, the deprecated and local-use translation ranges are
refused whole, and the known metadata addresses are refused by name.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

__all__ = ["AddressRefused", "UnresolvableHost", "literal_address", "refusal_reason", "resolve_public"]

# Cloud metadata and platform services, refused even where `is_global` would let them through.
METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean ...
        "169.254.170.2",  # AWS ECS task metadata
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud
        "168.63.129.16",  # Azure wire server
        "fd00:ec2::254",  # AWS over IPv6
    )
)

_V4_REFUSED = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (and Alibaba's metadata)
        "192.0.0.0/24",  # IETF protocol assignments (Oracle's metadata)
        "192.88.99.0/24",  # 6to4 relay anycast
        "198.18.0.0/15",  # benchmarking
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, broadcast
    )
)
_V4_COMPATIBLE = ipaddress.IPv6Network("::/96")  # deprecated; includes :: and ::1
_V4_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_V4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")  # SIIT
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")  # local-use: any embedding, refused whole
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_V6_REFUSED = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "100::/64",  # discard
        "2001:db8::/32",  # documentation
        "fc00::/7",  # unique local (AWS metadata's fd00:ec2::254)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)


class AddressRefused(Exception):
    """A host or address the policy refuses; `reason` says which address and why."""

    def __init__(self, host: str, address: str, reason: str) -> None:
        self.host = host
        self.address = address
        self.reason = reason
        super().__init__(f"{host} is a private or local address ({address}: {reason})")


class UnresolvableHost(Exception):
    """The host name does not resolve."""

    def __init__(self, host: str, detail: str) -> None:
        self.host = host
        self.detail = detail
        super().__init__(f"{host}: the name does not resolve ({detail})")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, str] | None:
    """The IPv4 address an IPv6 one carries (mapped, translated, NAT64, 6to4, Teredo), if any."""
    low32 = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _V4_MAPPED:
        return low32, "IPv4-mapped"
    if address in _V4_TRANSLATED:
        return low32, "IPv4-translated"
    if address in _NAT64:
        return low32, "NAT64"
    if address.sixtofour is not None:
        return address.sixtofour, "6to4"
    if address.teredo is not None:
        return address.teredo[1], "Teredo"
    return None


def refusal_reason(address: IPAddress) -> str | None:
    """Why the agent may not connect to `address`, or None when it is a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        address = ipaddress.IPv6Address(int(address))  # drop a scope id (fe80::1%eth0)
        if address in METADATA:
            return "a cloud metadata address"
        if address in _V4_COMPATIBLE:
            return "an IPv4-compatible or unspecified/loopback IPv6 address"
        if address in _NAT64_LOCAL:
            return "a local-use NAT64 address"
        carried = _embedded_ipv4(address)
        if carried is not None:
            inner, form = carried
            reason = refusal_reason(inner)
            return f"a {form} form of {inner}, {reason}" if reason else None
        if any(address in net for net in _V6_REFUSED) or not address.is_global:
            return "a loopback, private, link-local or otherwise non-public address"
        return None
    if address in METADATA:
        return "a cloud metadata address"
    if any(address in net for net in _V4_REFUSED) or not address.is_global:
        return "a loopback, private, link-local or otherwise non-public address"
    return None


def literal_address(host: str) -> IPAddress | None:
    """`host` as an IP address when it is one (brackets and a zone id allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


async def resolve_public(host: str, port: int, *, allow_private: bool = False) -> list[str]:
    """`host`'s addresses, resolved once, when every one may be reached; connect to these only.

    A name answering with a mix of public and private addresses is refused whole.

    Raises:
        AddressRefused: an address is not public (unless `allow_private`).
        UnresolvableHost: the name does not resolve.
    """
    literal = literal_address(host)
    if literal is not None:
        found: list[IPAddress] = [literal]
    else:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise UnresolvableHost(host, getattr(exc, "strerror", None) or str(exc)) from None
        found = [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]
    if not allow_private:
        for address in found:
            reason = refusal_reason(address)
            if reason is not None:
                raise AddressRefused(host, str(address), reason)
    return list(dict.fromkeys(str(a) for a in found))
