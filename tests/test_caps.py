"""Bounded work: each cap (seconds, tokens, LM calls, LM retries, web pages, strips, claims) is
configurable, stops or trims the work, and is reported in ``trace.caps_hit``."""

from __future__ import annotations

import time

import dspy
import pytest

from program.guards.caps import QuestionCaps, apply_caps
from program.judges.instruction import embed
from program.stages.crag import CRAG
from program.types import FALLBACK_ANSWER
from signatures import GenerateAnswer, GradeRetrieval
from tests.conftest import FOUNDING, ListKnowledgeBase

QUESTION = "Who founded Acme Rockets?"
MANY = ("Acme Rockets was founded by Jane Roe in 1999 in Ohio. Jane Roe first built hobby rockets for schools. "
        "Jane Roe later sold Acme Rockets to a larger firm. Jane Roe then taught engineering at a college.")


def crag(texts=(FOUNDING,), web=None, **caps):
    program = CRAG(ListKnowledgeBase(list(texts)), web=web)
    apply_caps(program, QuestionCaps(**caps))
    return program


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
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a: pytest.fail("no model should be loaded"))
    assert main(["ask", QUESTION, "--web", "none"]) == 2
    assert capsys.readouterr().err == "error: cap claims (CRAG_MAX_CLAIMS) must be > 0, got 0\n"


def test_the_time_cap_stops_the_question_before_its_next_step(fake_lm):
    def slow_irrelevant(inputs):
        time.sleep(0.5)
        return {"same_entity": False, "answers_question": False, "outdated": False}

    fake_lm.rules[GradeRetrieval] = slow_irrelevant
    program = crag(["a", "b", "c"], seconds=1.2)
    embed(["warm up"])  # the set-aside's embedder loads once per process (tens of seconds when the CPU is busy)
    started = time.monotonic()
    result = program(question=QUESTION)
    assert time.monotonic() - started < 1.2 + 0.5 + 0.3  # at most the call under way when time ran out
    assert result.fallback and result.answer == FALLBACK_ANSWER
    (hit,) = result.trace.caps_hit
    assert hit["cap"] == "seconds" and hit["limit"] == 1.2 and hit["detail"].startswith("reached before")
    assert fake_lm.calls["RewriteQuery"] == 0  # the correction never started
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
    result = crag(tokens=50)(question=QUESTION)
    assert result.fallback and fake_lm.calls["GenerateAnswer"] == 0
    assert result.trace.caps_hit[0]["cap"] == "tokens" and "tokens spent" in result.trace.caps_hit[0]["detail"]


def test_the_lm_call_cap_stops_the_question(fake_lm):
    result = crag(lm_calls=1)(question=QUESTION)
    assert result.fallback and sum(fake_lm.calls.values()) == 1
    assert result.trace.caps_hit == [{"cap": "lm_calls", "limit": 1,
                                      "detail": "reached before the 'refine-internal' step (1 calls made)"}]


def test_the_strip_cap_keeps_the_best_and_says_so(fake_lm):
    result = crag([MANY], strips=2)(question=QUESTION)
    assert len(result.strips) == 2
    assert {"cap": "strips", "limit": 2, "detail": "kept the best 2 of 4 strips above 0.5"} in result.trace.caps_hit


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

    fake_lm.rules[GradeRetrieval] = lambda i: {"same_entity": False, "answers_question": False, "outdated": False}
    result = crag(["Nothing about rockets here."], web=Generous(), web_pages=2)(question=QUESTION)
    assert len(result.trace.web[0]["passages"]) == 2
    assert {"cap": "web_pages", "limit": 2, "detail": "kept the first 2 of 5 in-scope hits"} in result.trace.caps_hit


def test_no_cap_is_reported_when_none_is_hit(fake_lm):
    result = crag()(question=QUESTION)
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]." and result.trace.caps_hit == []
    assert result.to_dict()["trace"]["caps_hit"] == []
