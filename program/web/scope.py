"""Scoped sources: keep the web path to the domains the user trusts.

The CRAG paper prefers authoritative sources such as Wikipedia for its web search; a
deployment may also have sources it never wants (content farms, forums). A domain names
itself and its subdomains: ``wikipedia.org`` covers ``en.wikipedia.org``, not ``notwikipedia.org``.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from program.web.config import domain_list


def host_in(host: str, domains) -> bool:
    """True when ``host`` is one of ``domains`` or a subdomain of one (case-insensitive)."""
    host = host.lower().rstrip(".")
    return any(host == d or host.endswith("." + d) for d in domains)


@dataclass(frozen=True)
class DomainScope:
    """Allowed and blocked domains for web hits.

    Args:
        allowed: when non-empty, only hosts on these domains are in scope.
        blocked: hosts on these domains are never in scope (blocked wins over allowed).

    An empty scope (both empty) lets every http(s) URL through.

    Example:
        >>> DomainScope(allowed=("wikipedia.org",)).allows("https://en.wikipedia.org/wiki/Harbin")
        True
    """

    allowed: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "allowed", domain_list(self.allowed))
        object.__setattr__(self, "blocked", domain_list(self.blocked))

    @classmethod
    def from_config(cls, config) -> "DomainScope":
        return cls(config.allowed_domains, config.blocked_domains)

    @property
    def restricted(self) -> bool:
        """True when the scope drops anything at all."""
        return bool(self.allowed or self.blocked)

    def allows(self, url: str) -> bool:
        """Whether ``url``'s host is in scope (a URL without a host never is)."""
        host = urlsplit(url).hostname or ""
        if not host:
            return False
        if host_in(host, self.blocked):
            return False
        return not self.allowed or host_in(host, self.allowed)

    def split(self, hits: list) -> tuple[list, list]:
        """``(in_scope, dropped)`` of hits with a ``url`` attribute, each in the original order."""
        kept, dropped = [], []
        for hit in hits:
            (kept if self.allows(hit.url) else dropped).append(hit)
        return kept, dropped
