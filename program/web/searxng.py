"""SearXNG backend: a self-hosted metasearch engine's JSON API.

``GET {SEARXNG_URL}/search?q=<query>&format=json`` → ``{"results": [{"url", "title", "content"}, ...]}``.
The instance must allow the JSON format (``search.formats: [html, json]`` in its settings.yml);
SearXNG answers 403 otherwise.
"""

from __future__ import annotations

from program.web.base import SearchHit, WebSearchError
from program.web.config import WebConfig
from program.web.extract import plain_text
from program.web.transport import make_session, request_json


class SearxngBackend:
    """Search through a SearXNG instance.

    Args:
        config: ``config.searx_url`` is the instance's base URL (env ``SEARXNG_URL``, flag
            ``--searx-url``); timeouts and retries come from it too.

    Raises:
        WebSearchError: (constructor) no URL configured; (``search``) the instance is
            unreachable, refuses JSON, or answers something else than SearXNG's format.

    Example:
        >>> SearxngBackend(WebConfig(backend="searxng", searx_url="http://127.0.0.1:8888")).search("Harbin", 3)
    """

    name = "searxng"

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig(backend="searxng")
        if not self.config.searx_url:
            raise WebSearchError(self.name, "no SearXNG URL; set SEARXNG_URL or --searx-url (e.g. http://127.0.0.1:8888)")
        self.url = self.config.searx_url.rstrip("/") + "/search"
        self.session = session or make_session(self.config)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` hits, best first, with SearXNG's ``content`` as the snippet (pages to fetch)."""
        if k <= 0 or not query.strip():
            return []
        data = request_json(
            self.session, self.name, "GET", self.url, timeout=self.config.timeout,
            params={"q": query, "format": "json", "pageno": 1},
            hint="check SEARXNG_URL / --searx-url points at a running SearXNG instance",
            auth_hint="enable the json format in the instance's settings.yml (search.formats: [html, json])")
        results = data.get("results")
        if not isinstance(results, list):
            raise WebSearchError(self.name, "unexpected response: no results list (is this a SearXNG instance?)")
        hits = [SearchHit(url=r["url"], title=plain_text(r.get("title") or ""),
                          snippet=plain_text(r.get("content") or ""))
                for r in results if isinstance(r, dict) and r.get("url")]
        return hits[:k]
