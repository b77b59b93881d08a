"""Serper backend: Google results through serper.dev.

``POST https://google.serper.dev/search`` with ``X-API-KEY: <SERPER_API_KEY>`` and
``{"q": ..., "num": k}`` → ``{"organic": [{"title", "link", "snippet", "position"}, ...]}``.
"""

from __future__ import annotations

from program.web.base import SearchHit
from program.web.extract import plain_text
from program.web.keyed import KeyedBackend
from program.web.transport import request_json, require_list


class SerperBackend(KeyedBackend):
    """Search Google through Serper.

    Args:
        config: ``config.serper_api_key`` (env ``SERPER_API_KEY``) and ``config.serper_url``.

    Raises:
        WebSearchError: (constructor) ``SERPER_API_KEY is not set``; (``search``) the key is
            refused, the service is unreachable, or the response has no ``organic`` list.

    Example:
        >>> SerperBackend(WebConfig.from_env(backend="serper")).search("Harbin province", 3)
    """

    name = "serper"
    key_variable = "SERPER_API_KEY"

    def _search(self, query: str, k: int) -> list[SearchHit]:
        """At most ``k`` organic hits, best first, with Google's snippet."""
        data = request_json(self.session, self.name, "POST", self.config.serper_url, timeout=self.config.timeout,
                            json={"q": query, "num": k}, headers={"X-API-KEY": self.key},
                            hint="check network access to google.serper.dev",
                            auth_hint="check SERPER_API_KEY (the key was refused)")
        organic = require_list(self.name, data, "organic")
        return [SearchHit(url=r["link"], title=plain_text(r.get("title") or ""),
                          snippet=plain_text(r.get("snippet") or ""))
                for r in organic if isinstance(r, dict) and r.get("link")][:k]
