"""URL safety for page fetching: only http(s), and never an internal address (SSRF).

A search hit's URL comes from the outside world, and so does every redirect: either could
point the fetcher at the machine itself (``127.0.0.1``), the private network (``10.x``), or a
cloud metadata service (``169.254.169.254``). Every URL and every redirect hop is resolved
with ``socket.getaddrinfo`` and refused when any of its addresses is not globally routable:
loopback, private, link-local, shared (CGNAT), reserved, multicast, unspecified, or an IPv6
address mapping one of those. The check is made right before each request, and the request
then connects to the address that was checked (``checked_address``), never to a second lookup of
the name: a DNS server answering a public address to the check and an internal one to the
connection (DNS rebinding) reaches nothing.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

ALLOWED_SCHEMES = ("http", "https")


class UnsafeURLError(ValueError):
    """The URL may not be fetched: not http(s), no host, unresolvable, or an internal address."""


def _is_internal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (not ip.is_global or ip.is_multicast or ip.is_loopback or ip.is_private or ip.is_link_local
            or ip.is_reserved or ip.is_unspecified)


def resolve(host: str, port: int, resolver=socket.getaddrinfo) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """All IP addresses ``host`` resolves to (an IP literal resolves to itself).

    Raises:
        UnsafeURLError: the name does not resolve.
    """
    try:
        infos = resolver(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OSError) as exc:
        raise UnsafeURLError(f"cannot resolve host {host!r}: {exc}") from exc
    return [ipaddress.ip_address(info[4][0].split("%", 1)[0]) for info in infos]


def check_url(url: str, allow_private: bool = False, private_networks=(), resolver=socket.getaddrinfo) -> str:
    """Return ``url`` if it may be fetched; raise ``UnsafeURLError`` saying why not.

    Args:
        url: the absolute URL about to be requested.
        allow_private: skip the address check (scheme and host are still checked).
        private_networks: CIDR networks (``"127.0.0.1/32"``, ``"10.0.0.0/8"``) whose internal
            addresses are allowed; every other internal address stays refused.
        resolver: ``socket.getaddrinfo`` or a stand-in with its signature (tests).

    Raises:
        UnsafeURLError: the scheme is not http or https, there is no host, the host does not
            resolve, or one of its addresses is internal and not allowed.
    """
    checked_address(url, allow_private, private_networks, resolver)
    return url


def checked_address(url: str, allow_private: bool = False, private_networks=(),
                    resolver=socket.getaddrinfo) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address to connect to for ``url``: the first one its host resolved to, all of them checked.

    Same arguments and errors as ``check_url``. Returns None when ``allow_private`` is set (no
    address was checked, so there is nothing to hold the connection to).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise UnsafeURLError(f"refused {url!r}: only http and https URLs are fetched, not {scheme or 'no scheme'}")
    host = parts.hostname
    if not host:
        raise UnsafeURLError(f"refused {url!r}: no host")
    if allow_private:
        return None
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError as exc:
        raise UnsafeURLError(f"refused {url!r}: bad port") from exc
    allowed = [ipaddress.ip_network(n, strict=False) for n in private_networks]
    addresses = resolve(host, port, resolver)
    for ip in addresses:
        if _is_internal(ip) and not any(ip in net for net in allowed if ip.version == net.version):
            raise UnsafeURLError(f"refused {url!r}: {host} resolves to the internal address {ip} "
                                 "(allow it with --allow-private-urls or WebConfig(allow_private=True))")
    if not addresses:
        raise UnsafeURLError(f"cannot resolve host {host!r}: no address")
    return addresses[0]
