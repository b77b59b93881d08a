"""`python -m program ask ... --web searxng --searx-url http://127.0.0.1:PORT`: the whole web path through
the command line, on the fake LM and the loopback server (in-process, so the fake LM answers)."""

from __future__ import annotations

import json

import pytest

from program.app.cli import main
from tests.conftest import FOUNDING, ListKnowledgeBase

Q = "Who founded Acme Rockets?"
OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."


@pytest.fixture
def cli(fake_lm, monkeypatch, tmp_path):
    """The CLI with the fake LM, a one-passage off-topic knowledge base, no embedder, no compiled program."""
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    for var in ("CRAG_WEB", "SEARXNG_URL", "CRAG_WEB_ALLOW", "CRAG_WEB_BLOCK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: fake_lm)
    monkeypatch.setattr("program.app.resources.knowledge_base", lambda *a: ListKnowledgeBase([OFF_TOPIC]))
    # no embedder for the refiner (the instruction judge embeds with the packaged one regardless)
    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    for where in ("program.app.startup", "program.app.factory"):  # no compiled program: the uncompiled signatures
        monkeypatch.setattr(f"{where}.has_compiled", lambda *a: False)
    return tmp_path


def test_ask_answers_through_searxng_on_loopback(cli, web_server, capsys):
    code = main(["ask", Q, "--web", "searxng", "--searx-url", web_server.base, "--allow-private-urls", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    acme, danube, error = (f"{web_server.base}/pages/{n}" for n in ("acme.html", "danube.html", "error.html"))
    assert result["action"] == "incorrect" and result["outcome"]["ending"] == "corrected"
    assert result["answer"] == "Acme Rockets was founded by Jane Roe [1]."
    (web,) = result["trace"]["web"]
    assert (web["question"], web["query"], web["backend"]) == (Q, "Acme Rockets founder", "searxng")  # the rewrite
    assert [h["url"] for h in web["hits"]] == [acme, danube]  # the hits (k=2)
    assert [f["url"] for f in web["fetched"]] == [acme, danube] and web["fetch_failures"] == []  # the pages
    assert [(s["text"], s["url"]) for s in result["strips"]] == [(f"Acme Rockets {FOUNDING}", acme)]  # strips kept
    refine_web = next(s for s in result["trace"]["steps"] if s["step"] == "refine-corrected")
    assert "kept 1 at threshold" in refine_web["notes"]
    assert result["citations"][0]["url"] == acme
    assert list((cli / "cache" / "web_pages").glob("*.json"))  # pages cached under CRAG_CACHE_DIR


def test_ask_prints_the_web_summary(cli, web_server, capsys, monkeypatch):
    monkeypatch.setenv("SEARXNG_URL", web_server.base)  # from the environment this time
    monkeypatch.setenv("CRAG_WEB", "searxng")
    assert main(["ask", Q, "--allow-private-urls"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Acme Rockets was founded by Jane Roe [1].")
    assert "web (searxng): query 'Acme Rockets founder': 2 hits, 0 out of scope, 2 pages fetched, 0 failed" in out


def test_ask_with_a_scope_that_drops_everything_abstains(cli, web_server, capsys):
    code = main(["ask", Q, "--web", "searxng", "--searx-url", web_server.base, "--allow-private-urls",
                 "--web-allow", "wikipedia.org", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0 and result["outcome"]["ending"] == "declined"
    assert result["answer"] == "I don't have reliable information on this."
    assert result["trace"]["web"][0]["dropped_by_scope"] == 3
    assert ("web path failed: all 3 hits are outside the allowed sources (3 dropped by scope)"
            in result["trace"]["events"])


def test_ask_without_private_urls_refuses_the_loopback_pages(cli, web_server, capsys):
    assert main(["ask", Q, "--web", "searxng", "--searx-url", web_server.base, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    failures = result["trace"]["web"][0]["fetch_failures"]
    assert [f["url"] for f in failures] == [f"{web_server.base}/pages/acme.html",
                                            f"{web_server.base}/pages/danube.html"]
    assert all("resolves to the internal address 127.0.0.1" in f["error"] for f in failures)
    # the snippets stand in for the refused pages and go through the same strip filter
    assert [s["text"] for s in result["strips"]] == ["Acme Rockets was founded by Jane Roe."]


@pytest.mark.parametrize("args, message", [
    (["--web", "tavily"], "error: tavily: TAVILY_API_KEY is not set; export TAVILY_API_KEY="),
    (["--web", "searxng"], "error: searxng: no SearXNG URL; set SEARXNG_URL or --searx-url"),
])
def test_ask_reports_a_backend_that_cannot_be_set_up(args, message, cli, capsys, monkeypatch):
    monkeypatch.delenv("TAVILY_API_KEY", raising=False)
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: pytest.fail("no model should be loaded"))
    assert main(["ask", Q, *args]) == 2
    assert capsys.readouterr().err.startswith(message)
