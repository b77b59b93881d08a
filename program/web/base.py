"""The web-search protocol every backend implements (offline snapshot, SearXNG, DuckDuckGo, …)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass
class SearchHit:
    """One search result.

    Attributes:
        url: the page URL.
        title: the page title, may be empty.
        snippet: a short excerpt relevant to the query.
        content: the full page text when the backend already has it, else "" (fetch the url).
    """

    url: str
    title: str
    snippet: str
    content: str = ""


class WebSearchError(RuntimeError):
    """A backend failed (unreachable, bad response, missing data). ``backend`` names it."""

    def __init__(self, backend: str, message: str):
        super().__init__(f"{backend}: {message}")
        self.backend = backend


@runtime_checkable
class SearchBackend(Protocol):
    """A web search backend.

    ``search(query, k)`` returns at most ``k`` hits, best first, and raises
    :class:`WebSearchError` on failure (never returns partial garbage silently).
    """

    name: str

    def search(self, query: str, k: int = 3) -> list[SearchHit]: ...
