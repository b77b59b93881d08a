"""A loopback HTTP server for the web tests: every search provider's documented response
format, and pages with the troubles real pages have. Nothing here reaches outside the machine.

Providers (each under its own prefix, so one server plays all of them):
    /searxng/search?q=..&format=json          SearXNG JSON API (403 without format=json); also at /search
    /ddg/html/?q=..                           DuckDuckGo HTML results page (uddg redirect links, an ad)
    /wiki/w/api.php?action=query&list=search  MediaWiki search, then prop=extracts|info
    /tavily/search         POST, Authorization: Bearer <KEY>
    /serper/search         POST, X-API-KEY: <KEY>
    /brave/res/v1/web/search  GET, X-Subscription-Token: <KEY>
A query containing "nothing" gets no results; "explode" gets an HTTP 500.

Pages: /pages/acme.html (boilerplate around the content), /pages/latin1.html (ISO-8859-1 in the
header), /pages/meta1252.html (windows-1252 in a meta tag only), /pages/notes.txt,
/pages/danube.html (off topic), /redirect/1 → /redirect/2 → /pages/acme.html, /redirect/loop,
/redirect/private (→ 10.0.0.1), /redirect/to?url=U (→ U), /pages/big.html (200 KB), /pages/slow.html (answers after
1.5 s), /pages/error.html (500), /pages/doc.pdf, /pages/missing.html (404), /flaky (503 once).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, urlsplit

KEY = "test-key"
FOUNDING = "Acme Rockets was founded by Jane Roe in 1999."
ACME_HTML = f"""<!doctype html><html><head><title>Acme Rockets - Encyclopedia</title>
<style>body {{ color: red }}</style><script>var tracker = "SCRIPT TEXT";</script></head>
<body>
<header><a href="/">Home</a> SITE HEADER</header>
<nav><ul><li>NAV LINK ONE</li><li>NAV LINK TWO</li></ul></nav>
<div id="cookie-banner" class="cookie-consent"><p>We use cookies. COOKIE BANNER TEXT.</p><button>Accept</button></div>
<main>
<h1>Acme Rockets</h1>
<p>{FOUNDING} The company builds small sounding rockets.</p>
<h2>Products</h2>
<ul><li>The Roadrunner sounding rocket.</li><li>The Coyote launch rail.</li></ul>
<form><label>Subscribe</label><input name="email"> FORM TEXT</form>
</main>
<aside class="sidebar">SIDEBAR TEXT</aside>
<footer>FOOTER TEXT (c) 2024</footer>
</body></html>"""
LATIN1_HTML = ("<html><head><title>Café Zürich</title></head><body><p>The Café Zürich serves crème brûlée "
               "since 1890.</p></body></html>")
META1252_HTML = ('<html><head><meta charset="windows-1252"><title>Quotes</title></head><body>'
                 "<p>He said \u201cnaïve\u201d \u2013 twice.</p></body></html>")
NOTES_TXT = "Acme Rockets notes.\nThe founder is\nJane Roe.\n\nSecond paragraph here.\n"
DANUBE_HTML = ("<html><head><title>Danube</title></head><body><main><p>The Danube flows through ten countries. "
               "It is Europe's second-longest river.</p></main></body></html>")
BIG_HTML = "<html><body><main>" + "<p>Filler sentence about nothing in particular.</p>" * 4000 + "</main></body></html>"
PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n%%EOF\n"


class LoopbackWeb(ThreadingHTTPServer):
    """The server; ``base`` is ``http://127.0.0.1:PORT``; ``requests`` logs (method, path, headers, body)."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server_address[1]}"
        self.requests: list[tuple[str, str, dict, bytes]] = []
        self.flaky_calls = 0
        self.hit_paths: list[str] | None = None  # set to make every provider return these pages
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def handle_error(self, request, client_address):
        pass  # a client that hung up on the slow page is expected

    def results(self, query: str) -> list[dict]:
        """The hits every provider returns for ``query``: (url, title, snippet) dicts."""
        if "nothing" in query:
            return []
        if self.hit_paths is not None:
            return [{"url": f"{self.base}{p}", "title": p.rsplit("/", 1)[-1], "snippet": ""} for p in self.hit_paths]
        return [
            {"url": f"{self.base}/pages/acme.html", "title": "Acme <b>Rockets</b>",
             "snippet": "Acme Rockets was <strong>founded</strong> by Jane Roe."},
            {"url": f"{self.base}/pages/danube.html", "title": "Danube", "snippet": "A river in Europe."},
            {"url": f"{self.base}/pages/error.html", "title": "Broken page", "snippet": ""},
        ]


class Handler(BaseHTTPRequestHandler):
    server: LoopbackWeb

    def log_message(self, *args):
        pass

    def _send(self, status: int, body: bytes | str, content_type: str = "text/html; charset=utf-8", headers=None):
        body = body.encode("utf-8") if isinstance(body, str) else body
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, data) -> None:
        self._send(status, json.dumps(data), "application/json")

    def _redirect(self, location: str) -> None:
        self._send(302, "", headers={"Location": location})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self._route("POST", self.rfile.read(length))

    def do_GET(self):
        self._route("GET", b"")

    def _route(self, method: str, body: bytes) -> None:
        self.server.requests.append((method, self.path, dict(self.headers), body))
        parts = urlsplit(self.path)
        path, query = parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()}
        provider = "searxng" if path == "/search" else path.split("/")[1]  # SearXNG also at the root
        handler = getattr(self, f"_{provider}", None)
        if handler is not None and provider not in ("pages", "redirect", "flaky"):
            q = query.get("q") or query.get("srsearch") or (json.loads(body or b"{}").get("query")
                                                            or json.loads(body or b"{}").get("q") or "")
            if "explode" in q:
                return self._send(500, "internal error")
            return handler(path, query, body, q)
        if provider == "redirect":
            return self._redirect(query["url"]) if path == "/redirect/to" else self._redirects(path)
        if path == "/flaky":
            self.server.flaky_calls += 1
            return self._send(503, "busy") if self.server.flaky_calls == 1 else self._send(200, ACME_HTML)
        return self._pages(path)

    # ---- providers -------------------------------------------------------------------------
    def _searxng(self, path, query, body, q):
        if query.get("format") != "json":
            return self._send(403, "Forbidden")
        hits = self.server.results(q)
        return self._json(200, {"query": q, "number_of_results": len(hits),
                                "results": [{"url": h["url"], "title": h["title"], "content": h["snippet"],
                                             "engine": "wikipedia", "score": 1.0} for h in hits]})

    def _ddg(self, path, query, body, q):
        hits = self.server.results(q)
        if "captcha" in q:
            return self._send(200, "<html><body><form>Please confirm you are human</form></body></html>")
        if not hits:
            return self._send(200, '<html><body><div class="no-results">No results.</div></body></html>')
        blocks = ['<div class="result results_links result--ad"><a class="result__a" '
                  'href="https://ads.example/click">Buy rockets</a><a class="result__snippet">AD</a></div>']
        for i, h in enumerate(hits):
            href = h["url"] if i == 1 else f"//duckduckgo.com/l/?uddg={quote(h['url'], safe='')}&rut=abc"
            blocks.append(f'<div class="result results_links results_links_deep web-result"><h2 class="result__title">'
                          f'<a rel="nofollow" class="result__a" href="{href}">{h["title"]}</a></h2>'
                          f'<a class="result__snippet" href="{href}">{h["snippet"]}</a></div>')
        return self._send(200, f"<html><body><div id='links' class='results'>{''.join(blocks)}</div></body></html>")

    def _wiki(self, path, query, body, q):
        if query.get("list") == "search":
            hits = [{"ns": 0, "title": t, "pageid": i, "snippet": f'<span class="searchmatch">{t}</span> article'}
                    for i, t in enumerate(["Acme Rockets", "Jane Roe"][: int(query.get("srlimit", 10))]
                                          if "nothing" not in q else [])]
            return self._json(200, {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(hits)},
                                                                     "search": hits}})
        if query.get("prop") == "extracts|info":
            title = query["titles"]
            extract = FOUNDING + " It builds rockets." if title == "Acme Rockets" else "Jane Roe is an engineer."
            return self._json(200, {"batchcomplete": True, "query": {"pages": [{
                "pageid": 1, "ns": 0, "title": title, "extract": extract,
                "fullurl": f"https://en.wikipedia.org/wiki/{title.replace(' ', '_')}"}]}})
        return self._json(200, {"error": {"code": "badparams", "info": "Unrecognized parameters."}})

    def _tavily(self, path, query, body, q):
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            return self._json(401, {"detail": {"error": "Unauthorized: missing or invalid API key."}})
        hits = self.server.results(q)[: json.loads(body).get("max_results", 5)]
        return self._json(200, {"query": q, "answer": None, "response_time": 0.1, "images": [],
                                "results": [{"title": h["title"], "url": h["url"], "content": h["snippet"],
                                             "score": 0.9, "raw_content": None} for h in hits]})

    def _searxoff(self, path, query, body, q):
        return self._send(403, "Forbidden")  # a SearXNG whose settings.yml does not enable json

    def _serper(self, path, query, body, q):
        if self.headers.get("X-API-KEY") != KEY:
            return self._json(403, {"message": "Unauthorized.", "statusCode": 403})
        hits = self.server.results(q)[: json.loads(body).get("num", 10)]
        return self._json(200, {"searchParameters": {"q": q, "type": "search", "engine": "google"},
                                "organic": [{"title": h["title"], "link": h["url"], "snippet": h["snippet"],
                                             "position": i + 1} for i, h in enumerate(hits)]})

    def _brave(self, path, query, body, q):
        if self.headers.get("X-Subscription-Token") != KEY:
            return self._json(401, {"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID",
                                                                       "status": 401}})
        hits = self.server.results(q)[: int(query.get("count", 20))]
        if not hits:
            return self._json(200, {"type": "search", "query": {"original": q}})
        return self._json(200, {"type": "search", "query": {"original": q},
                                "web": {"type": "search", "results": [
                                    {"title": h["title"], "url": h["url"], "description": h["snippet"],
                                     "type": "search_result"} for h in hits]}})

    # ---- pages ---------------------------------------------------------------------------
    def _redirects(self, path):
        target = {"/redirect/1": "/redirect/2", "/redirect/2": f"{self.server.base}/pages/acme.html",
                  "/redirect/loop": "/redirect/loop", "/redirect/private": "http://10.0.0.1/secret",
                  "/redirect/ftp": "ftp://127.0.0.1/file"}.get(path)
        return self._redirect(target) if target else self._send(404, "not found")

    def _pages(self, path):
        if path == "/pages/slow.html":
            time.sleep(1.5)
        pages = {
            "/pages/acme.html": (ACME_HTML.encode("utf-8"), "text/html; charset=utf-8"),
            "/pages/slow.html": (ACME_HTML.encode("utf-8"), "text/html; charset=utf-8"),
            "/pages/latin1.html": (LATIN1_HTML.encode("iso-8859-1"), "text/html; charset=ISO-8859-1"),
            "/pages/meta1252.html": (META1252_HTML.encode("cp1252"), "text/html"),
            "/pages/notes.txt": (NOTES_TXT.encode(), "text/plain"),
            "/pages/danube.html": (DANUBE_HTML.encode(), "text/html; charset=utf-8"),
            "/pages/big.html": (BIG_HTML.encode(), "text/html; charset=utf-8"),
            "/pages/doc.pdf": (PDF, "application/pdf"),
        }
        if path == "/pages/error.html":
            return self._send(500, "<html><body><p>Internal Server Error</p></body></html>")
        if path not in pages:
            return self._send(404, "<html><body><p>Not found</p></body></html>")
        body, content_type = pages[path]
        return self._send(200, body, content_type)


def start() -> LoopbackWeb:
    server = LoopbackWeb()
    server.thread.start()
    return server
