"""Serper backend: Google results through serper.dev.

``POST https://google.serper.dev/search`` with ``X-API-KEY: <SERPER_API_KEY>`` and
``{"q": ..., "num": k}`` → ``{"organic": [{"title", "link", "snippet", "position"}, ...]}``.
"""

from __future__ import annotations

from program.web.base import SearchHit
from program.web.config import WebConfig
from program.web.extract import plain_text
from program.web.transport import make_session, request_json, require_key, require_list


class SerperBackend:
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

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig.from_env(backend="serper")
        self.key = require_key(self.name, self.config.serper_api_key, "SERPER_API_KEY")
        self.session = session or make_session(self.config)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` organic hits, best first, with Google's snippet."""
        if k <= 0 or not query.strip():
            return []
        data = request_json(self.session, self.name, "POST", self.config.serper_url, timeout=self.config.timeout,
                            json={"q": query, "num": k}, headers={"X-API-KEY": self.key},
                            hint="check network access to google.serper.dev",
                            auth_hint="check SERPER_API_KEY (the key was refused)")
        organic = require_list(self.name, data, "organic")
        return [SearchHit(url=r["link"], title=plain_text(r.get("title") or ""), snippet=plain_text(r.get("snippet") or ""))
                for r in organic if isinstance(r, dict) and r.get("link")][:k]
