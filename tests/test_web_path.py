"""The web path end to end on the loopback server: rewrite, search, scope, fetch, the same strip
filter as internal documents, and failures that never end the program."""

from __future__ import annotations

from program.stages.crag import CRAG
from program.stages.draft import ConfidenceModel
from program.stages.web_path import WebSearcher
from program.types import FALLBACK_ANSWER, Action
from program.web.registry import build_backend
from signatures import GenerateAnswer, RewriteQuery
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase, generate
from tests.fake_lm import parse_list

Q = "Who founded Acme Rockets?"
OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."


def searcher(web_config, k=3, **changes):
    return WebSearcher(build_backend(web_config.with_(**changes)), k=k)


def fetched_paths(server):
    return sorted({p for _, p, _, _ in server.requests if p.startswith("/pages/")})


def test_rewrite_search_fetch_and_trace(fake_lm, web_server, web_config):
    found = searcher(web_config)(question=Q)
    acme, danube, error = (f"{web_server.base}/pages/{n}" for n in ("acme.html", "danube.html", "error.html"))
    assert (found.question, found.query, found.backend) == (Q, "Acme Rockets founder", "searxng")
    assert [h["url"] for h in found.hits] == [acme, danube, error] and found.dropped_by_scope == 0
    assert [(f["url"], f["title"]) for f in found.fetched] == [(acme, "Acme Rockets - Encyclopedia"),
                                                             (danube, "Danube")]
    assert found.fetch_failures == [{"url": error, "error": "HTTP 500", "snippet_used": False}]
    assert [p.url for p in found.passages] == [acme, danube]  # the broken page had no snippet to fall back on
    assert found.passages[0].source == "web" and FOUNDING in found.passages[0].text
    assert "NAV LINK" not in found.passages[0].text and found.error == ""
    record = found.to_trace()
    assert record["passages"] == [acme, danube] and record["query"] == "Acme Rockets founder"


def test_a_failed_fetch_falls_back_to_the_snippet(fake_lm, web_server, web_config):
    web_server.hit_paths = None
    found = searcher(web_config, backend="tavily")(question=Q)
    assert [p.url for p in found.passages][:2] == [f"{web_server.base}/pages/acme.html",
                                                   f"{web_server.base}/pages/danube.html"]
    web_server.hit_paths = ["/pages/doc.pdf"]
    found = searcher(web_config)(question=Q)
    assert found.passages == [] and "unsupported content type application/pdf" in found.error
    assert found.error.startswith("no usable web page (")


def test_hits_outside_scope_are_dropped_before_fetching(fake_lm, web_server, web_config):
    found = searcher(web_config, allowed_domains=("wikipedia.org",))(question=Q)
    assert found.passages == [] and found.dropped_by_scope == 3
    assert found.error == "all 3 hits are outside the allowed sources (3 dropped by scope)"
    assert fetched_paths(web_server) == []  # nothing was fetched
    assert [h["in_scope"] for h in found.hits] == [False, False, False]


def test_a_blocked_domain_is_dropped_and_counted(fake_lm, web_server, web_config):
    config = web_config.with_(blocked_domains=("127.0.0.1",))
    found = WebSearcher(build_backend(config), k=2)(question=Q)
    assert found.dropped_by_scope == 3 and fetched_paths(web_server) == []
    assert found.error == "all 3 hits are outside the allowed sources (3 dropped by scope)"
    _, path, _, _ = web_server.requests[0]
    assert "pageno=1" in path and len(found.hits) == 3  # a scope asks for 3 * k hits so that k can survive it


def test_backends_that_return_text_are_not_fetched(fake_lm, web_server, web_config):
    found = searcher(web_config, backend="wikipedia", k=2)(question=Q)
    assert [p.url for p in found.passages] == ["https://en.wikipedia.org/wiki/Acme_Rockets",
                                               "https://en.wikipedia.org/wiki/Jane_Roe"]
    assert found.fetched == [] and fetched_paths(web_server) == []
    scoped = searcher(web_config, backend="wikipedia", k=2, allowed_domains=("wikipedia.org",))(question=Q)
    assert scoped.dropped_by_scope == 0 and len(scoped.passages) == 2


def test_search_failures_become_errors_not_exceptions(fake_lm, web_server, web_config):
    fake_lm.rules[RewriteQuery] = lambda i: {"query": "explode"}  # the server answers HTTP 500
    found = searcher(web_config, retries=0)(question=Q)
    assert found.passages == [] and (found.question, found.query) == (Q, "explode")
    assert found.error.startswith("searxng: HTTP 500 from http://127.0.0.1:")
    fake_lm.rules[RewriteQuery] = lambda i: {"query": "nothing"}
    assert searcher(web_config)(question=Q).error == "searxng: no results for 'nothing'"
    fake_lm.rules[RewriteQuery] = lambda i: {"query": ""}  # an empty rewrite: the question is searched
    assert searcher(web_config)(question=Q).query == Q
    assert WebSearcher(None)(question=Q).error == "web search disabled"


def test_the_rewrite_receives_the_knowledge_base_candidate_terms(fake_lm):
    # CRAG §4.3 knowledge searching: the rewrite builds the query from the knowledge base's own terms
    seen = []
    fake_lm.rules[RewriteQuery] = lambda i: seen.append(i) or {"query": "Acme Rockets founder"}
    web = FakeWeb([("https://example.org/acme", FOUNDING)])
    terms = ["founder", "Acme Rockets", "launch pad"]
    found = WebSearcher(web, k=1)(question=Q, candidate_terms=terms)
    assert seen[0]["question"] == Q and parse_list(seen[0]["candidate_terms"]) == terms
    assert found.query == "Acme Rockets founder" and web.queries == ["Acme Rockets founder"]
    WebSearcher(web, k=1)(question=Q)  # no candidates: an empty list
    assert parse_list(seen[1]["candidate_terms"]) == []
    assert WebSearcher(web).rewrite_query(Q, ["founder"]) == "Acme Rockets founder"
    assert parse_list(seen[2]["candidate_terms"]) == ["founder"]
    found = WebSearcher(web, k=1)(question=Q, query="already rewritten")  # CRAG's correction rewrote it
    assert found.query == "already rewritten" and len(seen) == 3


def test_a_failed_rewrite_searches_the_question(fake_lm):
    def broken(inputs):
        raise RuntimeError("the model returned nothing parseable")

    fake_lm.rules[RewriteQuery] = broken
    web = FakeWeb([("https://example.org/acme", FOUNDING)])
    assert WebSearcher(web, k=1)(question=Q, candidate_terms=["founder"]).query == Q
    assert web.queries == [Q]


def test_a_completion_marker_left_in_the_query_is_removed(fake_lm):
    # the 1.5B model wrote "herlyn espinal occupation [[ ## completed ## ]]" as its query
    fake_lm.rules[RewriteQuery] = lambda i: {"query": "Acme Rockets founder [[ ## completed ## ]]"}
    assert WebSearcher(FakeWeb([])).rewrite_query(Q, []) == "Acme Rockets founder"


def test_an_irrelevant_page_contributes_nothing(fake_lm, web_server, web_config):
    # CRAG §4.4 on web pages: decompose, grade each strip, keep only relevant ones
    result = CRAG(ListKnowledgeBase([OFF_TOPIC]), web=build_backend(web_config), web_k=3)(question=Q)
    assert result.action is Action.INCORRECT
    # the page's heading "Acme Rockets" is too short to stand alone: decompose joins it to the next sentence
    assert [(s.text, s.url) for s in result.strips] == [(f"Acme Rockets {FOUNDING}",
                                                         f"{web_server.base}/pages/acme.html")]
    assert all("danube" not in s.source_id for s in result.strips)
    assert "Jane Roe" in result.answer and result.citations[0].url.endswith("/pages/acme.html")
    (record,) = result.trace.web
    assert record["query"] == "Acme Rockets founder" and len(record["fetched"]) == 2
    assert record["fetch_failures"][0]["error"] == "HTTP 500"
    assert result.to_dict()["trace"]["web"][0]["question"] == Q


def test_web_failure_with_nothing_internal_abstains_with_the_reason(fake_lm, web_server, web_config):
    web_server.hit_paths = ["/pages/error.html", "/pages/slow.html", "/pages/doc.pdf"]
    backend = build_backend(web_config.with_(read_timeout=0.3, retries=0))
    result = CRAG(ListKnowledgeBase([OFF_TOPIC]), web=backend, web_k=3)(question=Q)
    assert result.fallback and result.answer == FALLBACK_ANSWER
    (record,) = result.trace.web
    assert [f["error"] for f in record["fetch_failures"]] == [
        "HTTP 500", "timed out (no answer within 0.3 s)",
        "unsupported content type application/pdf (only HTML and plain text are read)"]
    assert any(e.startswith("web path failed: no usable web page (") for e in result.trace.events)


class _ByQueryKB(ListKnowledgeBase):
    """The first passage for the question itself, the second for any rewritten query."""

    def search(self, query, k=3):
        self.queries.append(query)
        return self.passages[:1] if query == Q else self.passages[1:2]


def test_web_failure_keeps_the_internal_answer(fake_lm, web_server, web_config):
    """AMBIGUOUS corrects from the knowledge base and the web: when the web is unreachable, the
    knowledge base searched again with the rewritten query still corrects the draft, and the
    answer comes from internal knowledge (the draft's passage and the one re-retrieval found)."""
    fake_lm.rules[GenerateAnswer] = lambda i: (
        generate(i) if "founded by Jane Roe" in i["context"]
        else {"answer": "Acme Rockets builds rockets in Ohio [1]."})
    # a confidence that reads only how much of the question the cited passages hold: the draft's
    # words stand in its passage (not INCORRECT), but it does not say who founded Acme (not CORRECT)
    coverage_only = ConfidenceModel(weights={"question_coverage": 10.0}, bias=-9.0)
    kb = _ByQueryKB(["Acme Rockets builds small rockets in Ohio.", FOUNDING])
    dead = web_config.with_(searx_url="http://127.0.0.1:9/", retries=0)
    result = CRAG(kb, web=build_backend(dead), confidence=coverage_only)(question=Q)
    assert result.action is Action.AMBIGUOUS and not result.fallback
    # the correction searches the question again beside the rewrite and fuses the two rankings
    assert kb.queries == [Q, Q, "Acme Rockets founder"]
    assert [s.source_id for s in result.strips] == ["doc0#0", "doc1#0"]
    assert result.answer == "Acme Rockets was founded by Jane Roe [2]." and result.confidence > 0.5
    assert [g.passage_id for g in result.corrected_grades] == ["doc1#0"]
    assert [s.step for s in result.trace.steps][4:9] == ["rewrite", "re-retrieve", "web-search", "evaluate-corrected",
                                                         "generate"]
    assert any(e.startswith("web path failed: searxng: cannot reach http://127.0.0.1:9/search")
               for e in result.trace.events)
    assert any(e.startswith("draft 0.09, corrected answer 0.73: kept the corrected answer")
               for e in result.trace.events)


def test_snapshot_like_backends_keep_working(fake_lm):
    web = FakeWeb([("https://en.wikipedia.org/wiki/Acme_Rockets", FOUNDING)])
    found = WebSearcher(web)(question=Q)
    assert [p.text for p in found.passages] == [FOUNDING] and found.fetched == [] and web.queries == [
        "Acme Rockets founder"]
