"""DuckDuckGo backend: the no-JavaScript HTML results page, parsed with beautifulsoup4.

``GET https://html.duckduckgo.com/html/?q=<query>`` returns result blocks ``div.result`` with a
link ``a.result__a`` and a snippet ``.result__snippet``. Links may be DuckDuckGo redirects
(``//duckduckgo.com/l/?uddg=<url-encoded target>``): the target is decoded. Ads
(``.result--ad``) are skipped. No API key; DuckDuckGo may rate-limit automated use, which
shows as a page without results.
"""

from __future__ import annotations

from urllib.parse import parse_qs, urljoin, urlsplit

from bs4 import BeautifulSoup

from program.web.base import SearchHit, WebSearchError
from program.web.config import WebConfig
from program.web.extract import plain_text
from program.web.transport import make_session, request


def decode_result_link(href: str, base: str = "https://html.duckduckgo.com/html/") -> str:
    """The target of a result link: ``//duckduckgo.com/l/?uddg=https%3A%2F%2Fx.org%2F&rut=…`` → ``https://x.org/``.

    A direct link is returned absolute (resolved against ``base``); "" when there is none.
    """
    if not href:
        return ""
    absolute = urljoin(base, href)
    parts = urlsplit(absolute)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg", [""])[0]
        return target
    return absolute


def parse_results(html: str, base: str = "https://html.duckduckgo.com/html/") -> list[SearchHit]:
    """The organic results of a DuckDuckGo HTML results page, in page order."""
    soup = BeautifulSoup(html, "html.parser")
    hits = []
    for block in soup.select("div.result"):
        if "result--ad" in (block.get("class") or []):
            continue
        link = block.select_one("a.result__a")
        if link is None:
            continue
        url = decode_result_link(link.get("href", ""), base)
        if not url.startswith(("http://", "https://")):
            continue
        snippet = block.select_one(".result__snippet")
        hits.append(SearchHit(url=url, title=plain_text(link.get_text(" ")),
                              snippet=plain_text(snippet.get_text(" ")) if snippet else ""))
    return hits


class DuckDuckGoBackend:
    """Search DuckDuckGo's HTML results page.

    Args:
        config: ``config.duckduckgo_url`` is the results page (default
            ``https://html.duckduckgo.com/html/``); timeouts and retries come from it too.

    Raises:
        WebSearchError: (``search``) unreachable, an HTTP error, or a page with no result
            blocks at all (a rate-limit or challenge page; a page that says "No results" gives ``[]``).

    Example:
        >>> DuckDuckGoBackend().search("Harbin Heilongjiang", 3)
    """

    name = "duckduckgo"

    def __init__(self, config: WebConfig | None = None, session=None):
        self.config = config or WebConfig(backend="duckduckgo")
        self.url = self.config.duckduckgo_url
        self.session = session or make_session(self.config)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """At most ``k`` hits, best first, with DuckDuckGo's snippet (pages to fetch)."""
        if k <= 0 or not query.strip():
            return []
        response = request(self.session, self.name, "GET", self.url, timeout=self.config.timeout,
                           params={"q": query},
                           hint="check network access to DuckDuckGo (or set another backend with --web)")
        html = response.text
        hits = parse_results(html, self.url)
        if not hits and "result__a" not in html and "no-results" not in html and "No results" not in html:
            raise WebSearchError(self.name, "the results page has no results section "
                                 "(DuckDuckGo may be rate-limiting this client); "
                                 "try again later or use another backend")
        return hits[:k]
