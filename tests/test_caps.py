"""Bounded work: each cap (seconds, tokens, LM calls, LM retries, web pages, strips, claims) is
configurable, stops or trims the work, and is reported in ``trace.caps_hit``."""

from __future__ import annotations

import time

import dspy
import pytest

from program.guards.caps import QuestionCaps
from program.judges.instruction import embed
from program.stages.crag import CRAG
from program.types import FALLBACK_ANSWER
from signatures import GenerateAnswer
from tests.conftest import FOUNDING, ListKnowledgeBase

QUESTION = "Who founded Acme Rockets?"
MANY = ("Acme Rockets was founded by Jane Roe in 1999 in Ohio. Jane Roe first built hobby rockets for schools. "
        "Jane Roe later sold Acme Rockets to a larger firm. Jane Roe then taught engineering at a college.")


def crag(texts=(FOUNDING,), web=None, **caps):
    return CRAG(ListKnowledgeBase(list(texts)), web=web, caps=QuestionCaps(**caps))


def test_caps_given_at_construction_reach_every_part():
    caps = QuestionCaps(web_pages=1, strips=2, claims=3, seconds=9.0)
    program = crag(web_pages=1, strips=2, claims=3, seconds=9.0)
    assert (program.settings.caps, program.web_searcher.k, program.refiner.max_strips, program.checker.max_claims) == \
           (caps, 1, 2, 3)
    default = CRAG(ListKnowledgeBase([FOUNDING]), web_k=3)
    assert default.settings.caps is None and (default.web_searcher.k, default.refiner.max_strips,
                                              default.checker.max_claims) == (3, 4, 8)


def test_the_caps_come_from_the_environment_and_refuse_bad_values(monkeypatch):
    monkeypatch.setenv("CRAG_MAX_SECONDS", "12.5")
    monkeypatch.setenv("CRAG_MAX_STRIPS", "2")
    caps = QuestionCaps.from_env(claims=3)
    assert (caps.seconds, caps.strips, caps.claims, caps.tokens) == (12.5, 2, 3, 60000)
    monkeypatch.setenv("CRAG_MAX_TOKENS", "lots")
    with pytest.raises(ValueError, match="CRAG_MAX_TOKENS must be a whole number, got 'lots'"):
        QuestionCaps.from_env()
    with pytest.raises(ValueError, match=r"cap seconds \(CRAG_MAX_SECONDS\) must be > 0, got 0"):
        QuestionCaps(seconds=0)
    with pytest.raises(ValueError, match=r"cap lm_retries \(CRAG_LM_RETRIES\) must be >= 0, got -1"):
        QuestionCaps(lm_retries=-1)


def test_ask_refuses_a_bad_cap_in_one_line(monkeypatch, capsys):
    from program.app.cli import main

    monkeypatch.setenv("CRAG_MAX_CLAIMS", "0")
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: pytest.fail("no model should be loaded"))
    assert main(["ask", QUESTION, "--web", "none"]) == 2
    assert capsys.readouterr().err == "error: cap claims (CRAG_MAX_CLAIMS) must be > 0, got 0\n"


def test_the_time_cap_stops_the_question_before_its_next_step(fake_lm):
    """The draft is the route's first LM call (passages are scored without one): a draft that
    outlasts the cap is let finish, and the question stops before the next step ('decide')."""
    def slow_draft(inputs):
        time.sleep(1.4)
        return {"answer": "I don't know."}

    fake_lm.rules[GenerateAnswer] = slow_draft
    program = crag(["a", "b", "c"], seconds=1.2)
    embed(["warm up"])  # the set-aside's embedder loads once per process (tens of seconds when the CPU is busy)
    started = time.monotonic()
    result = program(question=QUESTION)
    assert time.monotonic() - started < 1.2 + 0.5 + 0.3  # at most the call under way when time ran out
    assert result.fallback and result.answer == FALLBACK_ANSWER
    (hit,) = result.trace.caps_hit
    assert hit == {"cap": "seconds", "limit": 1.2, "detail": "reached before the 'decide' step"}
    assert [s.step for s in result.trace.steps] == ["retrieve", "evaluate", "draft"]
    assert dict(fake_lm.calls) == {"GenerateAnswer": 1}  # the correction (RewriteQuery) never started
    assert any(e.startswith("stopped: seconds cap of 1.2 reached") for e in result.trace.events)


def test_a_hanging_served_model_is_cut_at_the_time_cap(monkeypatch):
    from program.lm.configure import build_lm
    from tests.served_fake_lm import start

    server = start(fault="timeout", hang=30)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        lm = build_lm("openai/fake", api_base=server.base)  # its own timeout: 60 s
        lm.cache = False
        started = time.monotonic()
        with dspy.context(lm=lm):
            result = crag(seconds=2)(question=QUESTION)
        elapsed = time.monotonic() - started
    finally:
        server.stop()
    assert elapsed < 2 + 1.5 and result.fallback
    assert result.trace.caps_hit[-1]["cap"] == "seconds"


def test_the_token_cap_stops_the_question(fake_lm):
    """The draft (the first LM call) spends more than 50 tokens: the question stops before the
    next step, with the fallback instead of the draft's answer."""
    result = crag(tokens=50)(question=QUESTION)
    assert result.fallback and result.answer == FALLBACK_ANSWER
    assert dict(fake_lm.calls) == {"GenerateAnswer": 1}
    (hit,) = result.trace.caps_hit
    spent = result.trace.prompt_tokens + result.trace.completion_tokens
    assert spent > 50
    assert hit == {"cap": "tokens", "limit": 50,
                   "detail": f"reached before the 'decide' step ({spent} tokens spent)"}


def test_the_lm_call_cap_stops_the_question(fake_lm):
    """One call allowed: the draft is made, and the question stops before deciding on it."""
    result = crag(lm_calls=1)(question=QUESTION)
    assert result.fallback and sum(fake_lm.calls.values()) == 1 == fake_lm.calls["GenerateAnswer"]
    assert result.trace.caps_hit == [{"cap": "lm_calls", "limit": 1,
                                      "detail": "reached before the 'decide' step (1 calls made)"}]


def test_the_strip_cap_keeps_the_best_and_says_so(fake_lm):
    """Only web pages are refined into strips now (knowledge-base passages are read whole): an
    off-topic knowledge base makes the draft abstain, the correction finds a page of four
    relevant sentences and the strip cap keeps the best two."""
    from tests.conftest import FakeWeb

    web = FakeWeb([("https://example.org/acme", MANY)])
    result = crag(["Nothing about rockets here."], web=web, strips=2)(question=QUESTION)
    assert result.action.value == "incorrect" and fake_lm.calls["StripRelevance"] == 4
    assert [s.url for s in result.strips] == ["https://example.org/acme"] * 2
    assert {"cap": "strips", "limit": 2, "detail": "kept the best 2 of 4 strips above 0.5"} in result.trace.caps_hit


def test_the_strip_cap_does_not_cut_knowledge_base_passages(fake_lm):
    """A knowledge-base passage is one context entry, read whole as plain RAG reads it: the strip
    cap (a cap on refined strips) neither splits nor trims it."""
    result = crag([MANY], strips=2)(question=QUESTION)
    assert [(s.source_id, s.text) for s in result.strips] == [("doc0#0", MANY)]
    assert fake_lm.calls["StripRelevance"] == 0 and result.trace.caps_hit == []


def test_the_claim_cap_checks_the_first_claims_and_says_so(fake_lm):
    fake_lm.rules[GenerateAnswer] = lambda i: {"answer": "Acme Rockets was founded by Jane Roe [1]. It was 1999 [1]. "
                                                         "It was in Ohio [1]."}
    result = crag(claims=2)(question=QUESTION)
    assert len(result.claims) == 2
    assert {"cap": "claims", "limit": 2, "detail": "checked the first 2 of 3 claims"} in result.trace.caps_hit


def test_the_web_page_cap_keeps_the_first_hits_and_says_so(fake_lm):
    from program.web.base import SearchHit

    class Generous:  # a backend that returns more hits than it was asked for
        name = "generous"

        def search(self, query, k=3):
            return [SearchHit(url=f"https://example.org/{n}", title=f"p{n}", snippet="", content=FOUNDING)
                    for n in range(5)]

    # the draft abstains on an off-topic passage, so the correction searches the web
    result = crag(["Nothing about rockets here."], web=Generous(), web_pages=2)(question=QUESTION)
    assert result.draft == "I don't know." and fake_lm.calls["GradeRetrieval"] == 0
    assert len(result.trace.web[0]["passages"]) == 2
    assert {"cap": "web_pages", "limit": 2, "detail": "kept the first 2 of 5 in-scope hits"} in result.trace.caps_hit


def test_no_cap_is_reported_when_none_is_hit(fake_lm):
    result = crag()(question=QUESTION)
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]." and result.trace.caps_hit == []
    assert result.to_dict()["trace"]["caps_hit"] == []
