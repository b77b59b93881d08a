"""The web path's typed configuration: backend, endpoints, keys, limits, safety and scope.

One ``WebConfig`` carries everything the web path needs; ``WebConfig.from_env`` fills it from
environment variables and explicit overrides (a flag or a Python argument wins over the
environment, the environment over the defaults).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from program.paths import cache_root

BACKEND_NAMES = ("snapshot", "searxng", "duckduckgo", "wikipedia", "tavily", "serper", "brave", "none")

# environment variable -> WebConfig field
ENV_VARS = {
    "CRAG_WEB": "backend",
    "SEARXNG_URL": "searx_url",
    "TAVILY_API_KEY": "tavily_api_key",
    "SERPER_API_KEY": "serper_api_key",
    "BRAVE_API_KEY": "brave_api_key",
    "CRAG_WEB_ALLOW": "allowed_domains",
    "CRAG_WEB_BLOCK": "blocked_domains",
}


def domain_list(value) -> tuple[str, ...]:
    """``"a.org, b.com"`` or an iterable of names → ``("a.org", "b.com")``, lower-cased, no leading dots."""
    items = value.split(",") if isinstance(value, str) else list(value or ())
    return tuple(d.strip().lower().lstrip(".") for d in items if d and d.strip())


@dataclass(frozen=True)
class WebConfig:
    """Configuration of CRAG's web path (CRAG §4.3, knowledge searching).

    Attributes:
        backend: one of ``BACKEND_NAMES`` (env ``CRAG_WEB``); ``none`` disables the web.
        searx_url: base URL of a SearXNG instance (env ``SEARXNG_URL``), e.g. ``http://127.0.0.1:8888``.
        duckduckgo_url, wikipedia_url, tavily_url, serper_url, brave_url: provider endpoints;
            point them elsewhere (a proxy, a test server) without code changes.
        tavily_api_key, serper_api_key, brave_api_key: API keys (env ``TAVILY_API_KEY``,
            ``SERPER_API_KEY``, ``BRAVE_API_KEY``); never shown in ``repr``.
        snapshot_path: JSONL pages for the offline ``snapshot`` backend ("" = the PopQA snapshot).
        connect_timeout, read_timeout: seconds, per request (read: between bytes received).
        retries: extra attempts on connection errors, read timeouts and HTTP 429/5xx (capped).
        backoff: back-off factor in seconds (urllib3: ``backoff * 2**(attempt-1)``, at most 10 s).
        max_bytes: bytes read per page at most (read as a stream; the rest is not downloaded).
        max_redirects: redirect hops followed per page, each checked like the first URL.
        fetch_workers: pages fetched in parallel (a small bound: a search gives a few hits).
        cache_dir: on-disk page cache ("" = ``<cache>/web_pages``); cache_ttl: its expiry in
            seconds (0 disables the cache).
        allow_private: allow fetching loopback, private, link-local and reserved addresses
            (tests, self-hosted intranets). ``private_networks`` allows only these CIDR
            networks (e.g. ``("127.0.0.1/32",)``) and keeps the rest refused.
        allowed_domains: if non-empty, only hits on these domains (and their subdomains)
            are used (env ``CRAG_WEB_ALLOW``, comma-separated); blocked_domains: never used
            (env ``CRAG_WEB_BLOCK``). Blocked wins over allowed.
        user_agent: the User-Agent sent with every request.
    """

    backend: str = "snapshot"
    searx_url: str = ""
    duckduckgo_url: str = "https://html.duckduckgo.com/html/"
    wikipedia_url: str = "https://en.wikipedia.org/w/api.php"
    tavily_url: str = "https://api.tavily.com/search"
    serper_url: str = "https://google.serper.dev/search"
    brave_url: str = "https://api.search.brave.com/res/v1/web/search"
    tavily_api_key: str = field(default="", repr=False)
    serper_api_key: str = field(default="", repr=False)
    brave_api_key: str = field(default="", repr=False)
    snapshot_path: str = ""
    connect_timeout: float = 3.05
    read_timeout: float = 10.0
    retries: int = 2
    backoff: float = 0.5
    max_bytes: int = 2_000_000
    max_redirects: int = 5
    fetch_workers: int = 4
    cache_dir: str = ""
    cache_ttl: float = 24 * 3600.0
    allow_private: bool = False
    private_networks: tuple[str, ...] = ()
    allowed_domains: tuple[str, ...] = ()
    blocked_domains: tuple[str, ...] = ()
    user_agent: str = "crag-dspy/0.1 (Corrective RAG web path)"

    def __post_init__(self):
        object.__setattr__(self, "allowed_domains", domain_list(self.allowed_domains))
        object.__setattr__(self, "blocked_domains", domain_list(self.blocked_domains))
        object.__setattr__(self, "private_networks", tuple(self.private_networks or ()))
        if self.backend not in BACKEND_NAMES:
            raise ValueError(f"unknown web backend {self.backend!r}; available: {', '.join(BACKEND_NAMES)}")

    @property
    def timeout(self) -> tuple[float, float]:
        """``(connect, read)`` seconds, as ``requests`` takes them."""
        return (self.connect_timeout, self.read_timeout)

    @property
    def page_cache_dir(self) -> Path:
        """Where fetched pages are cached: ``cache_dir`` or ``<cache>/web_pages``."""
        return Path(self.cache_dir) if self.cache_dir else cache_root() / "web_pages"

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "WebConfig":
        """Defaults, then the environment variables in ``ENV_VARS``, then ``overrides`` that are not None.

        Raises:
            ValueError: an unknown backend name or an unknown field in ``overrides``.
        """
        environ = os.environ if environ is None else environ
        known = {f.name for f in fields(cls)}
        unknown = set(overrides) - known
        if unknown:
            raise ValueError(f"unknown WebConfig field(s): {', '.join(sorted(unknown))}")
        values = {name: environ[var] for var, name in ENV_VARS.items() if environ.get(var)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def with_(self, **changes) -> "WebConfig":
        """A copy with ``changes`` applied (checked like the constructor)."""
        return replace(self, **changes)
