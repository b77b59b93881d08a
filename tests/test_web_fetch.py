"""Page fetching and main-text extraction against the loopback server: every page trouble it serves."""

from __future__ import annotations

import json
import time

import pytest

from program.web.extract import extract_main_text, plain_text
from program.web.fetch import FetchError, Page, PageFetcher, decode, parse_content_type
from tests.web_server import FOUNDING

ACME_TEXT = "\n".join([
    "Acme Rockets",
    f"{FOUNDING} The company builds small sounding rockets.",
    "Products",
    "The Roadrunner sounding rocket.",
    "The Coyote launch rail.",
])


def url(server, path):
    return server.base + path


def hits_on(server, path):
    return sum(1 for _, p, _, _ in server.requests if p.split("?")[0] == path)


def test_main_text_keeps_content_and_title_and_drops_boilerplate(web_server, web_config):
    page = PageFetcher(web_config).fetch(url(web_server, "/pages/acme.html"))
    assert isinstance(page, Page) and page.title == "Acme Rockets - Encyclopedia"
    assert page.text == ACME_TEXT
    for junk in ("SCRIPT", "color", "NAV LINK", "SITE HEADER", "COOKIE", "FORM TEXT", "SIDEBAR", "FOOTER", "Accept"):
        assert junk not in page.text
    assert (page.content_type, page.charset, page.truncated, page.redirects) == ("text/html", "utf-8", False, 0)


def test_declared_charsets_are_honoured(web_server, web_config):
    fetcher = PageFetcher(web_config)
    latin1 = fetcher.fetch(url(web_server, "/pages/latin1.html"))
    assert (latin1.title, latin1.text) == ("Café Zürich", "The Café Zürich serves crème brûlée since 1890.")
    assert latin1.charset == "iso8859-1"  # from the Content-Type header
    meta = fetcher.fetch(url(web_server, "/pages/meta1252.html"))
    assert meta.text == "He said \u201cnaïve\u201d \u2013 twice." and meta.charset == "cp1252"  # from <meta charset>


def test_plain_text_pages_are_read_as_paragraphs(web_server, web_config):
    page = PageFetcher(web_config).fetch(url(web_server, "/pages/notes.txt"))
    assert (page.title, page.content_type) == ("", "text/plain")
    assert page.text == "Acme Rockets notes. The founder is Jane Roe.\nSecond paragraph here."


def test_redirect_chain_is_followed(web_server, web_config):
    page = PageFetcher(web_config).fetch(url(web_server, "/redirect/1"))
    assert page.final_url == url(web_server, "/pages/acme.html") and page.redirects == 2
    assert page.url == url(web_server, "/redirect/1") and page.text == ACME_TEXT


def test_redirects_are_capped(web_server, web_config):
    with pytest.raises(FetchError, match=r"/redirect/loop: more than 3 redirects$"):
        PageFetcher(web_config.with_(max_redirects=3)).fetch(url(web_server, "/redirect/loop"))
    assert hits_on(web_server, "/redirect/loop") == 4


def test_a_page_over_the_byte_limit_is_cut_at_the_limit(web_server, web_config):
    page = PageFetcher(web_config.with_(max_bytes=50_000)).fetch(url(web_server, "/pages/big.html"))
    assert page.truncated and page.size == 50_000
    assert page.text.startswith("Filler sentence about nothing in particular.")
    assert page.text.count("\n") < 50_000 // 50  # only what the first 50 kB hold


def test_a_slow_page_times_out(web_server, web_config):
    started = time.monotonic()
    with pytest.raises(FetchError, match=r"/pages/slow\.html: timed out \(no answer within 0\.3 s\)"):
        PageFetcher(web_config.with_(read_timeout=0.3, retries=0)).fetch(url(web_server, "/pages/slow.html"))
    assert time.monotonic() - started < 1.2


def test_http_errors_are_retried_then_reported(web_server, web_config):
    fetcher = PageFetcher(web_config.with_(retries=2))
    with pytest.raises(FetchError, match=r"/pages/error\.html: HTTP 500$"):
        fetcher.fetch(url(web_server, "/pages/error.html"))
    assert hits_on(web_server, "/pages/error.html") == 3  # capped: one try and two retries
    with pytest.raises(FetchError, match=r"/pages/missing\.html: HTTP 404$"):
        fetcher.fetch(url(web_server, "/pages/missing.html"))
    assert hits_on(web_server, "/pages/missing.html") == 1  # a 404 is not retried
    assert fetcher.fetch(url(web_server, "/flaky")).title == "Acme Rockets - Encyclopedia"  # 503, then 200
    assert web_server.flaky_calls == 2


def test_only_html_and_plain_text_are_read(web_server, web_config):
    with pytest.raises(FetchError, match=r"/pages/doc\.pdf: unsupported content type application/pdf "
                                         r"\(only HTML and plain text are read\)"):
        PageFetcher(web_config).fetch(url(web_server, "/pages/doc.pdf"))


def test_fetch_all_runs_in_parallel_and_keeps_order(web_server, web_config):
    fetcher = PageFetcher(web_config.with_(read_timeout=1.0, retries=0, fetch_workers=3))
    started = time.monotonic()
    results = fetcher.fetch_all([url(web_server, p) for p in
                                 ("/pages/slow.html", "/pages/acme.html", "/pages/doc.pdf", "/pages/latin1.html")])
    elapsed = time.monotonic() - started
    assert isinstance(results[0], FetchError) and "timed out" in results[0].reason
    assert results[1].title == "Acme Rockets - Encyclopedia" and results[3].title == "Café Zürich"
    assert isinstance(results[2], FetchError) and "application/pdf" in results[2].reason
    assert elapsed < 1.8  # the others did not wait behind the slow page
    assert fetcher.fetch_all([]) == []


def test_pages_are_cached_on_disk_until_they_expire(web_server, web_config, tmp_path):
    config = web_config.with_(cache_ttl=60, cache_dir=str(tmp_path / "cache"))
    first = PageFetcher(config).fetch(url(web_server, "/pages/acme.html"))
    second = PageFetcher(config).fetch(url(web_server, "/pages/acme.html"))
    assert not first.from_cache and second.from_cache and second.text == first.text
    assert hits_on(web_server, "/pages/acme.html") == 1
    (record_path,) = (tmp_path / "cache").glob("*.json")
    record = json.loads(record_path.read_text())
    record["fetched_at"] -= 61  # an hour later, so to speak
    record_path.write_text(json.dumps(record))
    third = PageFetcher(config).fetch(url(web_server, "/pages/acme.html"))
    assert not third.from_cache and hits_on(web_server, "/pages/acme.html") == 2
    with pytest.raises(FetchError):
        PageFetcher(config).fetch(url(web_server, "/pages/error.html"))
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1  # failures are not cached
    strict = config.with_(private_networks=())
    with pytest.raises(FetchError, match="internal address 127.0.0.1"):
        PageFetcher(strict).fetch(url(web_server, "/pages/acme.html"))  # cached, but not allowed any more


def test_extraction_details():
    html = """<html><head><meta property="og:title" content="OG title"></head><body>
    <div class="menu">MENU</div><article><h2>Facts</h2><ul><li><p>Nested paragraph once.</p></li></ul>
    <div role="navigation">ROLE NAV</div><p hidden>HIDDEN</p><table><tr><td>Cell text</td></tr></table></article>
    </body></html>"""
    page = extract_main_text(html)
    assert page.title == "OG title"
    assert page.text == "Facts\nNested paragraph once.\nCell text"
    assert extract_main_text("<html><body><div>Only a div of text.</div></body></html>").text == "Only a div of text."
    assert extract_main_text("").text == ""
    assert plain_text("Acme <strong>Rockets</strong> &amp; co") == "Acme Rockets & co"


def test_content_type_and_decoding_rules():
    assert parse_content_type("text/HTML; charset=\"ISO-8859-1\"") == ("text/html", "iso-8859-1")
    assert parse_content_type("") == ("application/octet-stream", "")
    assert decode("é".encode("utf-8"), "text/html", "") == ("é", "utf-8")
    assert decode("é".encode("cp1252"), "text/html", "") == ("é", "cp1252")  # not UTF-8: windows-1252
    assert decode("é".encode("utf-8"), "text/html", "no-such-charset") == ("é", "utf-8")
