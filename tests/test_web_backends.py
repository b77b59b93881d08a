"""Every search backend against the loopback server in its provider's format: the right hits, the right errors."""

from __future__ import annotations

import json
import socket
from urllib.parse import parse_qs, urlsplit

import pytest

from program.web import SearchBackend, WebConfig, WebSearchError
from program.web.brave import BraveBackend
from program.web.duckduckgo import DuckDuckGoBackend, decode_result_link, parse_results
from program.web.registry import build_backend
from program.web.searxng import SearxngBackend
from program.web.serper import SerperBackend
from program.web.tavily import TavilyBackend
from program.web.wikipedia import WikipediaBackend
from tests.web_server import KEY

SNIPPET_BACKENDS = ["searxng", "duckduckgo", "tavily", "serper", "brave"]


def pages(server, *names):
    return [f"{server.base}/pages/{n}" for n in names]


def dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


def searches(server):
    return [(m, urlsplit(p).path, parse_qs(urlsplit(p).query), h, b) for m, p, h, b in server.requests]


@pytest.mark.parametrize("name", SNIPPET_BACKENDS)
def test_snippet_backends_return_the_providers_hits(name, web_server, web_config):
    backend = build_backend(web_config.with_(backend=name))
    assert isinstance(backend, SearchBackend) and backend.name == name and backend.config.backend == name
    hits = backend.search("Acme Rockets founder", 2)
    assert [(h.url, h.title, h.snippet, h.content) for h in hits] == [
        (pages(web_server, "acme.html")[0], "Acme Rockets", "Acme Rockets was founded by Jane Roe.", ""),
        (pages(web_server, "danube.html")[0], "Danube", "A river in Europe.", ""),
    ]  # markup removed from titles and snippets; no content: the pages are fetched later
    assert backend.search("nothing at all", 3) == []
    assert backend.search("   ", 3) == [] and backend.search("Acme", 0) == []


def test_searxng_sends_the_query_as_json_api_request(web_server, web_config):
    SearxngBackend(web_config).search("Acme Rockets founder", 3)
    method, path, query, _, _ = searches(web_server)[-1]
    assert (method, path, query["q"], query["format"]) == ("GET", "/searxng/search", ["Acme Rockets founder"], ["json"])


def test_searxng_errors_say_what_to_set(web_server, web_config):
    with pytest.raises(WebSearchError, match=r"^searxng: no SearXNG URL; set SEARXNG_URL or --searx-url"):
        SearxngBackend(web_config.with_(searx_url=""))
    dead = web_config.with_(searx_url=f"http://127.0.0.1:{dead_port()}")
    with pytest.raises(WebSearchError, match=r"^searxng: cannot reach http://127\.0\.0\.1:\d+/search "
                                             r"\(Connection refused\); check SEARXNG_URL / --searx-url") as err:
        SearxngBackend(dead).search("Acme", 3)
    assert err.value.backend == "searxng"
    with pytest.raises(WebSearchError, match=r"HTTP 403 .*enable the json format in the instance's settings\.yml"):
        SearxngBackend(web_config.with_(searx_url=f"{web_server.base}/searxoff")).search("Acme", 3)
    with pytest.raises(WebSearchError, match=r"^searxng: the response from .*/ddg/html/search is not JSON \(text/html"):
        SearxngBackend(web_config.with_(searx_url=f"{web_server.base}/ddg/html")).search("Acme", 3)


def test_a_5xx_is_retried_then_reported(web_server, web_config):
    with pytest.raises(WebSearchError, match=r"^searxng: HTTP 500 from http://127\.0\.0\.1:\d+/searxng/search"):
        SearxngBackend(web_config.with_(retries=2)).search("explode", 3)
    assert len(web_server.requests) == 3  # the first try and two capped retries


def test_duckduckgo_decodes_redirect_links_and_skips_ads(web_server, web_config):
    hits = DuckDuckGoBackend(web_config).search("Acme Rockets founder", 5)
    assert [h.url for h in hits] == pages(web_server, "acme.html", "danube.html", "error.html")
    assert all("ads.example" not in h.url for h in hits)
    assert decode_result_link("//duckduckgo.com/l/?uddg=https%3A%2F%2Fen.wikipedia.org%2Fwiki%2FHarbin&rut=x") \
        == "https://en.wikipedia.org/wiki/Harbin"
    assert decode_result_link("https://example.org/a") == "https://example.org/a"
    assert decode_result_link("") == ""
    assert parse_results("<html><body><p>nothing here</p></body></html>") == []


def test_duckduckgo_challenge_page_is_an_error(web_server, web_config):
    with pytest.raises(WebSearchError, match=r"^duckduckgo: the results page has no results section .*rate-limiting"):
        DuckDuckGoBackend(web_config).search("captcha please", 3)


def test_wikipedia_searches_then_reads_extracts(web_server, web_config):
    hits = WikipediaBackend(web_config).search("Acme Rockets founder", 2)
    assert [(h.url, h.title, h.snippet) for h in hits] == [
        ("https://en.wikipedia.org/wiki/Acme_Rockets", "Acme Rockets", "Acme Rockets article"),
        ("https://en.wikipedia.org/wiki/Jane_Roe", "Jane Roe", "Jane Roe article"),
    ]
    assert hits[0].content == "Acme Rockets was founded by Jane Roe in 1999. It builds rockets."
    calls = searches(web_server)
    assert calls[0][2]["list"] == ["search"] and calls[0][2]["srsearch"] == ["Acme Rockets founder"]
    assert calls[1][2]["prop"] == ["extracts|info"] and calls[1][2]["explaintext"] == ["1"]
    assert calls[1][2]["titles"] == ["Acme Rockets"]
    assert WikipediaBackend(web_config).search("nothing", 2) == []


def test_wikipedia_api_error_is_reported(web_server, web_config):
    backend = WikipediaBackend(web_config)
    with pytest.raises(WebSearchError, match=r"^wikipedia: API error: Unrecognized parameters\."):
        backend._query(list="bogus")


@pytest.mark.parametrize("cls, variable", [(TavilyBackend, "TAVILY_API_KEY"), (SerperBackend, "SERPER_API_KEY"),
                                           (BraveBackend, "BRAVE_API_KEY")])
def test_keyed_backends_need_their_key(cls, variable, web_config, monkeypatch):
    monkeypatch.delenv(variable, raising=False)
    field = variable.lower()
    with pytest.raises(WebSearchError, match=rf"^{cls.name}: {variable} is not set; export {variable}=") as err:
        cls(web_config.with_(**{field: ""}))
    assert err.value.backend == cls.name
    with pytest.raises(WebSearchError, match=rf"^{cls.name}: HTTP 40[13] from .*: the request was refused; "
                                             rf"check {variable} \(the key was refused\)"):
        cls(web_config.with_(**{field: "wrong-key"})).search("Acme", 3)
    monkeypatch.setenv(variable, KEY)  # the key from the environment works
    assert getattr(WebConfig.from_env(backend=cls.name), field) == KEY


def test_keyed_backends_send_the_documented_requests(web_server, web_config):
    TavilyBackend(web_config).search("Acme founder", 2)
    SerperBackend(web_config).search("Acme founder", 2)
    BraveBackend(web_config).search("Acme founder", 2)
    tavily, serper, brave = searches(web_server)
    assert tavily[:2] == ("POST", "/tavily/search") and tavily[3]["Authorization"] == f"Bearer {KEY}"
    assert json.loads(tavily[4])["query"] == "Acme founder" and json.loads(tavily[4])["max_results"] == 2
    assert serper[:2] == ("POST", "/serper/search") and serper[3]["X-API-KEY"] == KEY
    assert json.loads(serper[4]) == {"q": "Acme founder", "num": 2}
    assert brave[:2] == ("GET", "/brave/res/v1/web/search") and brave[3]["X-Subscription-Token"] == KEY
    assert brave[2] == {"q": ["Acme founder"], "count": ["2"]}


@pytest.mark.parametrize("name", SNIPPET_BACKENDS + ["wikipedia"])
def test_an_unreachable_service_names_the_backend(name, web_config):
    dead = f"http://127.0.0.1:{dead_port()}"
    config = web_config.with_(backend=name, retries=0, searx_url=dead, duckduckgo_url=dead + "/html/",
                              wikipedia_url=dead + "/w/api.php", tavily_url=dead + "/search",
                              serper_url=dead + "/search", brave_url=dead + "/search")
    with pytest.raises(WebSearchError,
                       match=rf"^{name}: cannot reach http://127\.0\.0\.1:\d+/\S* \(Connection refused\)"):
        build_backend(config).search("Acme", 2)


def test_a_slow_service_times_out(web_config, web_server):
    backend = SearxngBackend(web_config.with_(read_timeout=0.3, retries=0))
    backend.url = f"{web_server.base}/pages/slow.html"  # answers after 1.5 s
    with pytest.raises(WebSearchError,
                       match=r"^searxng: http://127\.0\.0\.1:\d+/pages/slow\.html did not answer within 0\.3 s"):
        backend.search("Acme", 2)


def test_registry_and_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("CRAG_WEB", "wikipedia")
    monkeypatch.setenv("SEARXNG_URL", "http://searx.local:8888")
    monkeypatch.setenv("CRAG_WEB_ALLOW", "Wikipedia.org, .britannica.com")
    config = WebConfig.from_env()
    assert (config.backend, config.searx_url) == ("wikipedia", "http://searx.local:8888")
    assert config.allowed_domains == ("wikipedia.org", "britannica.com")
    assert WebConfig.from_env(backend="searxng", searx_url=None).backend == "searxng"  # an override wins, None does not
    assert isinstance(build_backend(config), WikipediaBackend)
    assert build_backend(config.with_(backend="none")) is None
    assert "test-key" not in repr(WebConfig(tavily_api_key="test-key"))  # keys never printed
    with pytest.raises(ValueError, match=r"unknown web backend 'bing'; available: snapshot, searxng"):
        WebConfig(backend="bing")
    with pytest.raises(ValueError, match="unknown WebConfig field"):
        WebConfig.from_env(colour="red")
    with pytest.raises(WebSearchError, match=r"offline-snapshot: snapshot file not found"):
        build_backend(WebConfig(backend="snapshot", snapshot_path=str(tmp_path / "none.jsonl")))


def test_resources_builds_backends_by_name(monkeypatch, web_config):
    from program.app import resources

    monkeypatch.setenv("SEARXNG_URL", web_config.searx_url)
    assert isinstance(resources.web_backend("searxng"), SearxngBackend)
    assert resources.web_backend("none") is None and resources.web_backend(None) is None
    assert isinstance(resources.resolve_web(web_config.with_(backend="serper")), SerperBackend)
    with pytest.raises(ValueError, match="unknown web backend"):
        resources.web_backend("bing")


def test_keyed_backend_is_abstract():
    # a backend that forgets _search fails at construction, not at its first query
    from program.web.keyed import KeyedBackend

    class Incomplete(KeyedBackend):
        name, key_variable = "tavily", "TAVILY_API_KEY"

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()
