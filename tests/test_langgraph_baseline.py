"""The ``langgraph`` mode: LangGraph's CRAG tutorial as a baseline, on the deterministic fake LM.

Binary grades per passage; a rewritten web search when one is graded no; the top 3 web texts
added to the kept passages; the shared generator. Also built by the factory and run by
``python -m optimize.evaluate`` beside ``rag`` (the harness of tests/test_evaluate_modes.py).
"""

from __future__ import annotations

import json

import pytest

from program.app.factory import build_program as real_build_program
from program.stages.baselines import LangGraphCRAG
from program.types import Action, CRAGResult
from program.web.base import WebSearchError
from signatures import GradeDocumentBinary, RewriteForWebSearch
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase
from tests.test_evaluate_modes import QuestionKB, QuestionWeb, _csv, run_eval  # noqa: F401 - run_eval: the fixture

OFF_TOPIC = "The Danube flows through ten countries."
ACME_ROCKETS = "Acme Rockets builds small sounding rockets for university teams."
QUERY = "Who founded the company Acme Rockets?"  # tests/conftest.py's RewriteForWebSearch rule
LONG_PAGE = "Rocket history. " * 150  # 2,400 characters: cut to 1,500
PAGES = [("https://example.org/acme", "Company history. " + FOUNDING), ("https://example.org/long", LONG_PAGE),
         ("https://example.org/third", "Acme Rockets is based in Ohio."), ("https://example.org/fourth", "Not used.")]


def ask(texts, web, k=3, question="Who founded Acme Rockets?"):
    kb = ListKnowledgeBase(texts)
    return LangGraphCRAG(kb, web=web, k=k)(question=question), kb


def test_all_passages_relevant_no_rewrite_no_web(fake_lm):
    web = FakeWeb(PAGES)
    result, kb = ask([FOUNDING, ACME_ROCKETS, "Acme Rockets is based in Ohio."], web)
    assert isinstance(result, CRAGResult) and result.mode == "langgraph"
    assert result.action is Action.CORRECT and result.confidence == 1.0
    assert kb.queries == ["Who founded Acme Rockets?"]
    assert web.queries == [] and result.trace.web == [] and result.trace.rewritten_query == ""
    assert dict(fake_lm.calls) == {"GradeDocumentBinary": 3, "GenerateAnswer": 1}
    assert result.trace.lm_calls == 4
    assert [(s.step, s.lm_calls) for s in result.trace.steps] == [("retrieve", 0), ("grade", 3), ("generate", 1),
                                                                  ("cite", 0)]
    assert result.trace.steps[1].notes == "3 of 3 graded yes"
    assert [(g.passage_id, g.score, g.reason) for g in result.grades] == \
        [("doc0#0", 1.0, "relevant"), ("doc1#0", 1.0, "relevant"), ("doc2#0", 1.0, "relevant")]
    assert [s.source_id for s in result.strips] == ["doc0#0", "doc1#0", "doc2#0"]
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert [(c.number, c.source_id) for c in result.citations] == [(1, "doc0#0")]
    assert not result.fallback


def test_one_passage_irrelevant_rewrites_and_adds_three_web_texts(fake_lm):
    web = FakeWeb(PAGES)
    result, _ = ask([ACME_ROCKETS, OFF_TOPIC], web)
    assert result.action is Action.INCORRECT and result.confidence == 1.0
    assert web.queries == [QUERY] and result.trace.rewritten_query == QUERY
    assert dict(fake_lm.calls) == {"GradeDocumentBinary": 2, "RewriteForWebSearch": 1, "GenerateAnswer": 1}
    assert [(s.step, s.lm_calls) for s in result.trace.steps] == \
        [("retrieve", 0), ("grade", 2), ("rewrite", 1), ("web-search", 0), ("generate", 1), ("cite", 0)]
    assert [(g.score, g.reason) for g in result.grades] == [(1.0, "relevant"), (0.0, "irrelevant")]
    # the kept passage, then the top 3 web texts (content, cut to 1500 characters) with their urls
    assert [(s.source_id, s.url) for s in result.strips] == [("doc0#0", "")] + [(u, u) for u, _ in PAGES[:3]]
    assert [s.text for s in result.strips] == [ACME_ROCKETS, PAGES[0][1], LONG_PAGE[:1500], PAGES[2][1]]
    assert result.answer == "Acme Rockets was founded by Jane Roe [2]."
    assert [(c.number, c.url) for c in result.citations] == [(2, "https://example.org/acme")]
    assert result.trace.web == [{"question": "Who founded Acme Rockets?", "query": QUERY, "backend": "fake-web",
                                 "hits": [{"url": u, "title": u, "snippet": t[:80]} for u, t in PAGES[:3]],
                                 "error": ""}]


def test_snippet_is_the_text_when_a_hit_has_no_content(fake_lm):
    class SnippetWeb(FakeWeb):
        def search(self, query, k=3):
            return [type(h)(url=h.url, title=h.title, snippet=h.snippet, content="") for h in super().search(query, k)]

    result, _ = ask([OFF_TOPIC], SnippetWeb(PAGES[:1]))
    assert [s.text for s in result.strips] == [PAGES[0][1][:80]]
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."


@pytest.mark.parametrize("error, expected", [
    (RuntimeError("connection reset"), "fake-web: RuntimeError: connection reset"),
    (WebSearchError("fake-web", "HTTP 503"), "fake-web: HTTP 503"),  # names its backend already
])
def test_web_failure_answers_from_the_kept_passages(fake_lm, error, expected):
    web = FakeWeb(PAGES, error=error)
    result, _ = ask([FOUNDING, OFF_TOPIC], web)
    assert web.queries == [QUERY]
    assert result.action is Action.INCORRECT
    assert [s.source_id for s in result.strips] == ["doc0#0"]
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert result.trace.web[0]["error"] == expected and result.trace.web[0]["hits"] == []
    assert f"web search failed: {expected}; answering from the kept passages" in result.trace.events
    assert [s.step for s in result.trace.steps] == ["retrieve", "grade", "rewrite", "web-search", "generate", "cite"]
    assert result.trace.steps[3].notes == expected


def test_nothing_relevant_and_no_web_text_generates_from_an_empty_context(fake_lm):
    result, _ = ask([OFF_TOPIC], FakeWeb([]))
    assert result.action is Action.INCORRECT and result.confidence == 0.0
    assert result.strips == [] and result.answer == "I don't know."
    assert result.trace.web[0]["error"] == f"fake-web: no usable results for {QUERY!r}"
    assert "no kept passage and no web text: generating from an empty context" in result.trace.events
    assert not result.fallback  # the tutorial has no honest fallback


def test_no_web_backend_skips_the_rewrite(fake_lm):
    result, _ = ask([FOUNDING, OFF_TOPIC], None)
    assert result.action is Action.INCORRECT and [s.source_id for s in result.strips] == ["doc0#0"]
    assert dict(fake_lm.calls) == {"GradeDocumentBinary": 2, "GenerateAnswer": 1}
    assert [s.step for s in result.trace.steps] == ["retrieve", "grade", "generate", "cite"]


def test_no_passage_retrieved_means_no_web_as_in_the_tutorial(fake_lm):
    web = FakeWeb(PAGES)
    result, _ = ask([], web)
    assert result.action is Action.CORRECT and result.grades == [] and web.queries == []
    assert dict(fake_lm.calls) == {"GenerateAnswer": 1}


def test_unparseable_grade_counts_as_no(fake_lm):
    fake_lm.rules[GradeDocumentBinary] = lambda i: {"relevant": "perhaps" if "Danube" in i["document"] else "yes"}
    web = FakeWeb(PAGES[:1])
    result, _ = ask([FOUNDING, OFF_TOPIC], web)
    assert [(g.score, g.reason, g.explanation) for g in result.grades] == \
        [(1.0, "relevant", "binary grade: yes"), (0.0, "irrelevant", "unparseable grader output")]
    assert "grade doc1#0: unparseable output (AdapterParseError); counted as no" in result.trace.events
    # DSPy's ChatAdapter asks once more in JSON before giving up: 2 passages, 3 grading calls
    assert fake_lm.calls["GradeDocumentBinary"] == 3 and result.trace.steps[1].lm_calls == 3
    assert result.action is Action.INCORRECT and web.queries == [QUERY]


def test_empty_rewrite_searches_with_the_question(fake_lm):
    fake_lm.rules[RewriteForWebSearch] = lambda i: {"query": " "}
    web = FakeWeb(PAGES)
    result, _ = ask([OFF_TOPIC], web)
    assert web.queries == ["Who founded Acme Rockets?"] == [result.trace.rewritten_query]


def test_grading_and_rewriting_run_at_temperature_zero(fake_lm):
    ask([ACME_ROCKETS, OFF_TOPIC], FakeWeb(PAGES))
    temperatures = [(h["messages"][0]["content"], h["kwargs"].get("temperature")) for h in fake_lm.history]
    critiques = [t for system, t in temperatures if "grader" in system or "re-writer" in system]
    assert critiques == [0.0, 0.0, 0.0]


def test_factory_builds_langgraph_with_the_shared_compiled_generator(fake_lm, monkeypatch):
    from program.app.compiled import COMPILED_DIR, has_compiled

    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    kb, web = ListKnowledgeBase([FOUNDING, OFF_TOPIC]), FakeWeb(PAGES)
    program = real_build_program("langgraph", compiled_dir=None, knowledge_base=kb, web=web)
    assert isinstance(program, LangGraphCRAG)
    assert program.knowledge_base is kb and program.web is web and (program.k, program.web_k) == (3, 3)
    result = program(question="Who founded Acme Rockets?")
    assert (result.mode, result.action, web.queries) == ("langgraph", Action.INCORRECT, [QUERY])

    if not has_compiled(COMPILED_DIR):
        pytest.skip("no compiled program in compiled/")
    state = json.loads((COMPILED_DIR / "crag.json").read_text())
    rag = real_build_program("rag", compiled_dir=COMPILED_DIR, knowledge_base=kb, web=web)
    program = real_build_program("langgraph", compiled_dir=COMPILED_DIR, knowledge_base=kb, web=web)
    assert program.web is web
    compiled_demos = state["generator.generate"]["demos"]
    assert len(program.generator.generate.demos) == len(rag.generator.generate.demos) == len(compiled_demos)
    assert program.generator.generate.signature.instructions == state["generator.generate"]["signature"]["instructions"]
    # the tutorial's own prompts stay uncompiled
    assert program.grader.signature.instructions == GradeDocumentBinary.instructions
    assert program.grader.demos == [] and program.rewriter.demos == []


def test_evaluate_compares_rag_and_langgraph(run_eval, fake_lm, monkeypatch, capsys):
    """The real factory behind ``python -m optimize.evaluate --modes rag,langgraph`` (the harness's
    fake LM, question-keyed knowledge base and web; k=2)."""
    fake_lm.rules[RewriteForWebSearch] = lambda i: {"query": i["question"]}  # QuestionWeb is keyed by question
    web = QuestionWeb()

    def build_program(mode, *, compiled_dir=None, knowledge_base=None, decide_retrieval=False, **_):
        return real_build_program(mode, compiled_dir=None, knowledge_base=QuestionKB(), web=web, k=2,
                                  decide_retrieval=decide_retrieval)

    monkeypatch.setattr("program.app.factory.build_program", build_program)
    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    code, out = run_eval("--modes", "rag,langgraph")
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    rag, lg = s["modes"]["rag"], s["modes"]["langgraph"]
    # every question has an off-topic passage among its top 2, so every one takes the web route;
    # the web page names the founder for q2; q3 is answered from its kept Ohio passage (as rag
    # answers it); q4 abstains, rightly. rag says "I don't know." to q2.
    assert (rag["accuracy"], lg["accuracy"]) == (75.0, 100.0)
    assert lg["actions"] == {"correct": 0, "ambiguous": 0, "incorrect": 4} and rag["actions"] is None
    assert lg["correction_rate"] == 100.0 and lg["outcomes"] == {"answered": 4} and lg["fallback_rate"] == 0.0
    assert lg["action_accuracy"] == 50.0
    assert lg["confusion"] == {"correct": {"correct": 0, "ambiguous": 0, "incorrect": 2},
                               "ambiguous": {"correct": 0, "ambiguous": 0, "incorrect": 0},
                               "incorrect": {"correct": 0, "ambiguous": 0, "incorrect": 2}}
    # checked after the fact like rag: q2's invented claim is the one unsupported of 4
    assert (lg["groundedness"], lg["claims_checked"], lg["grounded_by"], lg["check_lm_calls"]) == \
        (75.0, 4, "post-hoc", 2)
    by = {(r["mode"], r["id"]): r for r in _csv(out / "results.csv")}
    assert [by[("langgraph", q)]["lm_calls"] for q in ("q1", "q2", "q3", "q4")] == ["4", "4", "4", "3"]
    assert [by[("rag", q)]["lm_calls"] for q in ("q1", "q2", "q3", "q4")] == ["1", "1", "1", "1"]
    assert by[("langgraph", "q3")]["answer"] == "Acme Rockets builds rockets in Ohio [1]."
    assert (lg["median_lm_calls"], rag["median_lm_calls"]) == (4, 1)
    assert [x["step"] for x in _csv(out / "steps.csv") if x["mode"] == "langgraph" and x["id"] == "q1"] == \
        ["retrieve", "grade", "rewrite", "web-search", "generate", "cite"]
    assert lg["steps"]["grade"] == pytest.approx(
        {**lg["steps"]["grade"], "ran": 4, "mean_lm_calls": (2 + 2 + 2 + 1) / 4})
    printed = capsys.readouterr().out
    assert "| langgraph | 4 | 0 | 100 % | 0/0/4 | 100 % |" in printed
    assert "evaluator confusion, langgraph" in printed and "| langgraph | rewrite | 4 |" in printed


FILLER = [f"Paragraph {n} on the history of sounding rockets: launch sites, payloads, recovery systems, "
          "telemetry, range safety and the student teams who fly them every summer season. " * 2
          for n in range(8)]  # about 330 characters each: the answer paragraph starts past 2,500


def test_the_excerpt_is_the_page_when_it_fits_and_its_matching_part_when_not():
    from program.web.excerpt import query_excerpt

    page = "\n\n".join(FILLER + [FOUNDING, "Its rockets fly from Spaceport America."])
    assert page.index(FOUNDING) > 1500
    short = "Company history.\n\n" + FOUNDING
    assert query_excerpt(QUERY, "Company history.", short) == short
    excerpt = query_excerpt(QUERY, FOUNDING, page)
    assert FOUNDING in excerpt and len(excerpt) <= 1500
    assert excerpt.index(FOUNDING) > 0  # page order: the filler paragraphs kept fill it before the answer
    assert query_excerpt(QUERY, "a live engine's snippet", "") == "a live engine's snippet"
    assert query_excerpt(QUERY, "", "") == ""
    long_one = "Rockets. " * 100 + FOUNDING + " More rockets." * 100  # one paragraph, 2,800 characters
    assert FOUNDING in query_excerpt(QUERY, FOUNDING, long_one, max_chars=500)


def test_the_web_text_holds_the_answer_past_the_first_1500_characters(fake_lm, tmp_path, embedder):
    """Issue: the offline snapshot's page was cut to its first 1,500 characters, losing the sentence
    that matched the query; the baseline now reads the page's extract for the query."""
    from program.web.snapshot import OfflineSnapshotBackend

    snapshot = tmp_path / "web_snapshot.jsonl"
    pages = [{"url": "https://example.org/acme", "title": "Acme Rockets", "paragraphs": FILLER + [FOUNDING]},
             {"url": "https://example.org/danube", "title": "Danube", "paragraphs": [OFF_TOPIC]}]
    snapshot.write_text("\n".join(json.dumps(p) for p in pages) + "\n")
    web = OfflineSnapshotBackend(snapshot, index_dir=tmp_path / "idx", embedder=embedder)
    assert "\n\n".join(pages[0]["paragraphs"]).index(FOUNDING) > 1500
    result, _ = ask([OFF_TOPIC], web)
    assert result.action is Action.INCORRECT and result.trace.rewritten_query == QUERY
    acme = next(s for s in result.strips if s.url == "https://example.org/acme")
    assert FOUNDING in acme.text and len(acme.text) <= 1500
    assert result.answer == f"Acme Rockets was founded by Jane Roe [{result.strips.index(acme) + 1}]."
