"""Brave backend: the Brave Search web search API.

``GET https://api.search.brave.com/res/v1/web/search?q=<query>&count=<k>`` with
``X-Subscription-Token: <BRAVE_API_KEY>`` → ``{"web": {"results": [{"url", "title", "description"}, ...]}}``.
Descriptions carry ``<strong>`` markup, removed here. A query with no web results may omit ``web``.
"""

from __future__ import annotations

from program.web.base import SearchHit, WebSearchError
from program.web.config import WebConfig
from program.web.extract import plain_text
from program.web.transport import make_session, request_json, require_key


class BraveBackend:
    """Search with the Brave Search API.

    Args:
        config: ``config.brave_api_key`` (env ``BRAVE_API_KEY``) and ``config.brave_url``.

    Raises:
        WebSearchError: (constructor) ``BRAVE_API_KEY is not set``; (``search``) the key is
            refused, the service is unreachable, or the response is not Brave's format.

    Example:
        >>> BraveBackend(WebConfig.from_env(backend="brave")).search("Harbin province", 3)
    """

    name = "brave"

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig.from_env(backend="brave")
        self.key = require_key(self.name, self.config.brave_api_key, "BRAVE_API_KEY")
        self.session = session or make_session(self.config)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` web hits, best first, with Brave's description as the snippet."""
        if k <= 0 or not query.strip():
            return []
        data = request_json(self.session, self.name, "GET", self.config.brave_url, timeout=self.config.timeout,
                            params={"q": query, "count": k},
                            headers={"X-Subscription-Token": self.key, "Accept": "application/json"},
                            hint="check network access to api.search.brave.com",
                            auth_hint="check BRAVE_API_KEY (the key was refused)")
        if data.get("type") not in (None, "search"):
            raise WebSearchError(self.name, f"unexpected response type {data.get('type')!r}")
        results = (data.get("web") or {}).get("results", [])
        if not isinstance(results, list):
            raise WebSearchError(self.name, "unexpected response: web.results is not a list")
        return [SearchHit(url=r["url"], title=plain_text(r.get("title") or ""),
                          snippet=plain_text(r.get("description") or ""))
                for r in results if isinstance(r, dict) and r.get("url")][:k]
