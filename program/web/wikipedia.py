"""Wikipedia backend: the MediaWiki search API, then the pages' plain-text extracts.

1. ``GET api.php?action=query&list=search&srsearch=<query>&srlimit=<k>&format=json&formatversion=2``
   → ``query.search[].title/snippet`` (snippets carry ``<span class="searchmatch">`` markup).
2. For each title, ``GET api.php?action=query&prop=extracts|info&explaintext=1&inprop=url&titles=<t>``
   → ``query.pages[].extract/fullurl``. TextExtracts returns one whole-article extract per request
   (several only with ``exintro``), so each page is its own request.

The CRAG paper prefers Wikipedia as an authoritative source; the hits carry the article text,
so nothing is fetched afterwards.
"""

from __future__ import annotations

from urllib.parse import quote

from program.web.base import SearchHit, WebSearchError
from program.web.config import WebConfig
from program.web.extract import plain_text
from program.web.transport import make_session, request_json, require_list


class WikipediaBackend:
    """Search Wikipedia and return articles with their plain-text extracts.

    Args:
        config: ``config.wikipedia_url`` is the wiki's ``api.php`` (default English Wikipedia;
            another language or any MediaWiki with TextExtracts works the same).

    A page whose extract comes back empty keeps the search snippet as its content.

    Raises:
        WebSearchError: (``search``) unreachable, an HTTP error, or an API error
            (``{"error": {"info": ...}}``).

    Example:
        >>> WikipediaBackend().search("Harbin", 2)[0].url
        'https://en.wikipedia.org/wiki/Harbin'
    """

    name = "wikipedia"

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig(backend="wikipedia")
        self.url = self.config.wikipedia_url
        self.session = session or make_session(self.config)

    def _query(self, **params) -> dict:
        data = request_json(self.session, self.name, "GET", self.url, timeout=self.config.timeout,
                            params={"action": "query", "format": "json", "formatversion": 2, **params},
                            hint="check network access to the wiki's api.php")
        if isinstance(data.get("error"), dict):
            raise WebSearchError(self.name, f"API error: {data['error'].get('info') or data['error'].get('code')}")
        return data

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` articles, best first, with ``content`` = the article's plain text."""
        if k <= 0 or not query.strip():
            return []
        found = require_list(self.name, self._query(list="search", srsearch=query, srlimit=k, srprop="snippet"),
                             "query", "search")
        hits = []
        for item in found[:k]:
            title = item.get("title") if isinstance(item, dict) else None
            if not title:
                continue
            pages = require_list(self.name, self._query(prop="extracts|info", explaintext=1, inprop="url",
                                                        redirects=1, titles=title), "query", "pages")
            page = pages[0] if pages and isinstance(pages[0], dict) else {}
            url = page.get("fullurl") or self.url.replace("/w/api.php", "/wiki/") + quote(title.replace(" ", "_"))
            snippet = plain_text(item.get("snippet") or "")
            hits.append(SearchHit(url=url, title=page.get("title") or title, snippet=snippet,
                                  content=(page.get("extract") or "").strip() or snippet))
        return hits
