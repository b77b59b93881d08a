"""Tavily backend: a search API built for LLM applications.

``POST https://api.tavily.com/search`` with ``Authorization: Bearer <TAVILY_API_KEY>`` and
``{"query": ..., "max_results": k}`` → ``{"results": [{"url", "title", "content", "score"}, ...]}``.
``content`` is a short extract, used as the snippet; the pages are fetched afterwards.
"""

from __future__ import annotations

from program.web.base import SearchHit
from program.web.extract import plain_text
from program.web.keyed import KeyedBackend
from program.web.transport import request_json, require_list


class TavilyBackend(KeyedBackend):
    """Search with Tavily.

    Args:
        config: ``config.tavily_api_key`` (env ``TAVILY_API_KEY``) and ``config.tavily_url``.

    Raises:
        WebSearchError: (constructor) ``TAVILY_API_KEY is not set``; (``search``) the key is
            refused (HTTP 401/403), the service is unreachable, or the response has no results list.

    Example:
        >>> TavilyBackend(WebConfig.from_env(backend="tavily")).search("Harbin province", 3)
    """

    name = "tavily"
    key_variable = "TAVILY_API_KEY"

    def _search(self, query: str, k: int) -> list[SearchHit]:
        """At most ``k`` hits, best first, with Tavily's ``content`` as the snippet."""
        data = request_json(self.session, self.name, "POST", self.config.tavily_url, timeout=self.config.timeout,
                            json={"query": query, "max_results": k, "search_depth": "basic"},
                            headers={"Authorization": f"Bearer {self.key}"},
                            hint="check network access to api.tavily.com",
                            auth_hint="check TAVILY_API_KEY (the key was refused)")
        results = require_list(self.name, data, "results")
        return [SearchHit(url=r["url"], title=plain_text(r.get("title") or ""),
                          snippet=plain_text(r.get("content") or ""))
                for r in results if isinstance(r, dict) and r.get("url")][:k]
