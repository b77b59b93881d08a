"""What the API-key search backends (Tavily, Serper, Brave) share: key, session, empty-query guard."""

from __future__ import annotations

from abc import ABC, abstractmethod

from program.web.base import SearchHit
from program.web.config import WebConfig
from program.web.transport import make_session, require_key


class KeyedBackend(ABC):
    """Base for a backend that needs an API key from the environment.

    Subclasses set ``name`` and ``key_variable`` (e.g. ``"TAVILY_API_KEY"``; the key is read
    from ``config.<name>_api_key``) and implement ``_search(query, k)``; the class itself is
    abstract and cannot be instantiated.

    Raises:
        WebSearchError: (constructor) ``<key_variable> is not set``.
    """

    name = ""
    key_variable = ""

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig.from_env(backend=self.name)
        self.key = require_key(self.name, getattr(self.config, f"{self.name}_api_key"), self.key_variable)
        self.session = session or make_session(self.config)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` hits, best first; [] for ``k <= 0`` or a blank query (no request)."""
        if k <= 0 or not query.strip():
            return []
        return self._search(query, k)

    @abstractmethod
    def _search(self, query: str, k: int) -> list[SearchHit]:
        """The provider's request for a non-blank ``query``: at most ``k`` hits, best first.

        Raises:
            WebSearchError: the provider failed (HTTP error, timeout, unreadable reply).
        """
