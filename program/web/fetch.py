"""Page fetching for the web path: safe, bounded, cached (CRAG §4.3: "navigate the URLs and
transcribe the pages").

Every fetch is bounded: connection and read timeouts, a total download time of four read
timeouts, capped retries with back-off (``program.web.transport.make_session``), at most
``max_bytes`` read as a stream, at most ``max_redirects`` hops, each hop checked by
``program.web.safety.check_url`` (and by the domain scope, when given) before it is requested,
and requested from the address that check vetted (``program.web.transport.get_at``).
Only HTML and plain text are read; the declared charset is honoured. Pages are fetched in
parallel by at most ``fetch_workers`` threads, and successful pages are cached on disk as
extracted text for ``cache_ttl`` seconds.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from email.message import Message
from pathlib import Path
from urllib.parse import urljoin

import requests

from program.atomic import write_atomic
from program.web.config import WebConfig
from program.web.extract import extract_main_text
from program.web.safety import UnsafeURLError, check_url, checked_address
from program.web.transport import describe, get_at, is_timeout, make_session

TEXT_TYPES = ("text/html", "application/xhtml+xml", "text/plain")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


class FetchError(RuntimeError):
    """A page could not be fetched or read. ``url`` is the URL asked for, ``reason`` says why."""

    def __init__(self, url: str, reason: str):
        super().__init__(f"{url}: {reason}")
        self.url, self.reason = url, reason


@dataclass
class Page:
    """A fetched page's main text.

    Attributes:
        url: the URL asked for; final_url: where the redirects ended.
        title: the page title ("" for plain text); text: main text, one block per line.
        content_type: e.g. ``text/html``; charset: the codec the body was decoded with.
        size: bytes read; truncated: True when the page was cut at ``max_bytes``.
        redirects: hops followed; from_cache: True when served from the on-disk cache.
    """

    url: str
    final_url: str
    title: str
    text: str
    content_type: str
    charset: str
    size: int
    truncated: bool = False
    redirects: int = 0
    from_cache: bool = False


class PageCache:
    """Pages on disk as JSON, one file per URL (sha256 of the URL), expiring after ``ttl`` seconds."""

    def __init__(self, directory: str | Path, ttl: float):
        self.directory, self.ttl = Path(directory), ttl

    def _path(self, url: str) -> Path:
        return self.directory / f"{hashlib.sha256(url.encode()).hexdigest()}.json"

    def get(self, url: str) -> Page | None:
        """The cached page, or None when absent, expired or unreadable."""
        try:
            record = json.loads(self._path(url).read_text())
            if time.time() - float(record["fetched_at"]) > self.ttl:
                return None
            return Page(**{**record["page"], "from_cache": True})
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, page: Page) -> None:
        """Store ``page`` (written under a temporary name, then renamed); a cache failure is ignored."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self._path(page.url)
            write_atomic(path, json.dumps({"fetched_at": time.time(), "page": asdict(page)}))
        except OSError:
            pass


def parse_content_type(header: str) -> tuple[str, str]:
    """``"text/html; charset=ISO-8859-1"`` → ``("text/html", "iso-8859-1")``; charset "" when absent."""
    message = Message()
    message["content-type"] = header or "application/octet-stream"
    return message.get_content_type(), (message.get_param("charset") or "").strip().lower()


def decode(body: bytes, content_type: str, declared: str) -> tuple[str, str]:
    """The body as text and the codec used: the header's charset, else an HTML ``<meta charset>``,
    else a BOM, else UTF-8 if it decodes, else windows-1252. Undecodable bytes become U+FFFD."""
    candidates = [declared]
    if content_type != "text/plain" and (found := _META_CHARSET.search(body[:4096])):
        candidates.append(found.group(1).decode("ascii").lower())
    for name in candidates:
        if name:
            try:
                return body.decode(codecs.lookup(name).name, errors="replace"), codecs.lookup(name).name
            except LookupError:
                continue  # an unknown charset name: try the next rule
    if body.startswith(codecs.BOM_UTF8):
        return body.decode("utf-8-sig", errors="replace"), "utf-8"
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return body.decode("cp1252", errors="replace"), "cp1252"


def plain_paragraphs(text: str) -> str:
    """Plain text with its wrapped lines joined: one paragraph per line."""
    return "\n".join(" ".join(p.split()) for p in re.split(r"\n\s*\n", text) if p.strip())


class PageFetcher:
    """Fetch pages safely and extract their main text.

    Args:
        config: limits, timeouts, retries, cache and safety settings (``WebConfig``).
        scope: a ``DomainScope``; a redirect that leaves it is refused. None: no scope check.
        resolver: ``socket.getaddrinfo`` or a stand-in (tests).

    ``fetch`` raises ``FetchError`` for: an unsafe URL or redirect hop, a timeout, a
    connection failure, HTTP 4xx/5xx (after the capped retries), too many redirects, a
    content type other than HTML or plain text (a PDF, an image), or a page with no text.
    A page over ``max_bytes`` is not an error: the first ``max_bytes`` are read and the page is
    marked ``truncated``. ``fetch_all`` never raises: it returns the error in the page's place.

    Example:
        >>> pages = PageFetcher(WebConfig())(["https://en.wikipedia.org/wiki/Harbin"])
    """

    def __init__(self, config: WebConfig | None = None, scope=None, resolver=socket.getaddrinfo):
        self.config = config or WebConfig()
        self.scope = scope
        self.resolver = resolver
        self.cache = PageCache(self.config.page_cache_dir, self.config.cache_ttl) if self.config.cache_ttl > 0 else None

    def __call__(self, urls: list[str]) -> list[Page | FetchError]:
        return self.fetch_all(urls)

    def fetch_all(self, urls: list[str]) -> list[Page | FetchError]:
        """Fetch ``urls`` in parallel (at most ``config.fetch_workers`` at once); results in input order."""
        if not urls:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(self.config.fetch_workers, len(urls)))) as pool:
            return list(pool.map(self._fetch_or_error, urls))

    def _fetch_or_error(self, url: str) -> Page | FetchError:
        try:
            return self.fetch(url)
        except FetchError as exc:
            return exc
        except Exception as exc:  # a bug in parsing a hostile page must not end the web path
            return FetchError(url, f"unexpected {type(exc).__name__}: {exc}")

    def fetch(self, url: str) -> Page:
        """The page at ``url`` (from the cache while fresh). Raises ``FetchError`` (see the class)."""
        try:  # also before the cache: a page cached under a laxer configuration is not served
            check_url(url, self.config.allow_private, self.config.private_networks, self.resolver)
        except UnsafeURLError as exc:
            raise FetchError(url, str(exc)) from exc
        if self.cache and (cached := self.cache.get(url)):
            return cached
        # one session per page: reused across its redirect hops, never shared between threads
        with make_session(self.config) as session:
            page = self._download(url, session)
        if self.cache:
            self.cache.put(page)
        return page

    def _download(self, url: str, session: requests.Session) -> Page:
        config, current = self.config, url
        for hop in range(config.max_redirects + 1):
            try:
                address = checked_address(current, config.allow_private, config.private_networks, self.resolver)
            except UnsafeURLError as exc:
                raise FetchError(url, str(exc)) from exc
            if hop and self.scope is not None and not self.scope.allows(current):
                raise FetchError(url, f"redirected out of the allowed sources to {current}")
            try:
                # to the address just checked, not to a second lookup of the name (DNS rebinding)
                response = get_at(session, config, current, address, stream=True, timeout=config.timeout,
                                  allow_redirects=False)
            except requests.RequestException as exc:
                if is_timeout(exc):
                    raise FetchError(url, f"timed out (no answer within {config.read_timeout:g} s)") from exc
                raise FetchError(url, f"cannot fetch ({describe(exc)})") from exc
            with response:
                if response.is_redirect:
                    current = urljoin(current, response.headers["Location"])
                    continue
                if response.status_code >= 400:
                    raise FetchError(url, f"HTTP {response.status_code}")
                content_type, charset = parse_content_type(response.headers.get("Content-Type", ""))
                if content_type not in TEXT_TYPES:
                    raise FetchError(url, f"unsupported content type {content_type} "
                                          "(only HTML and plain text are read)")
                body, truncated = self._read(url, response)
            return self._page(url, current, hop, content_type, charset, body, truncated)
        raise FetchError(url, f"more than {config.max_redirects} redirects")

    def _read(self, url: str, response: requests.Response) -> tuple[bytes, bool]:
        limit, deadline = self.config.max_bytes, time.monotonic() + 4 * self.config.read_timeout
        chunks, size = [], 0
        try:
            for chunk in response.iter_content(chunk_size=16384):
                chunks.append(chunk)
                size += len(chunk)
                if size >= limit:
                    return b"".join(chunks)[:limit], True  # the rest is never downloaded
                if time.monotonic() > deadline:
                    raise FetchError(url, f"download took longer than {4 * self.config.read_timeout:g} s")
        except requests.RequestException as exc:
            raise FetchError(url, f"timed out or broke while reading ({describe(exc)})") from exc
        return b"".join(chunks), False

    def _page(self, url, final_url, hops, content_type, declared, body, truncated) -> Page:
        text, codec = decode(body, content_type, declared)
        if content_type == "text/plain":
            title, text = "", plain_paragraphs(text)
        else:
            try:
                extracted = extract_main_text(text)
            except Exception as exc:
                raise FetchError(url, f"cannot parse the HTML ({type(exc).__name__}: {exc})") from exc
            title, text = extracted.title, extracted.text
        if not text.strip():
            raise FetchError(url, "no main text on the page")
        return Page(url=url, final_url=final_url, title=title, text=text, content_type=content_type,
                    charset=codec, size=len(body), truncated=truncated, redirects=hops)
