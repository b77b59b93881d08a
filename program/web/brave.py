"""Brave backend: the Brave Search web search API.

``GET https://api.search.brave.com/res/v1/web/search?q=<query>&count=<k>`` with
``X-Subscription-Token: <BRAVE_API_KEY>`` → ``{"web": {"results": [{"url", "title", "description"}, ...]}}``.
Descriptions carry ``<strong>`` markup, removed here. A query with no web results may omit ``web``.
"""

from __future__ import annotations

from program.web.base import SearchHit, WebSearchError
from program.web.extract import plain_text
from program.web.keyed import KeyedBackend
from program.web.transport import request_json


class BraveBackend(KeyedBackend):
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
    key_variable = "BRAVE_API_KEY"

    def _search(self, query: str, k: int) -> list[SearchHit]:
        """At most ``k`` web hits, best first, with Brave's description as the snippet."""
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
