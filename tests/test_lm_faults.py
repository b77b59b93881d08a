"""A served LM that fails or misbehaves (a real OpenAI-compatible loopback server, tests/served_fake_lm.py):
bounded retries with back-off, then one clear error naming the endpoint; or a degraded answer whose
reason is in the trace. Never a traceback, never a hang."""

from __future__ import annotations

import re
import subprocess
import sys
import time

import dspy
import pytest

from program.guards.caps import QuestionCaps
from program.judges.instruction import embed
from program.lm.configure import build_lm
from program.lm.retry import LMServiceError
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, ListKnowledgeBase
from tests.served_fake_lm import start

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

QUESTION = "Who founded Acme Rockets?"
ANSWER = "Acme Rockets was founded by Jane Roe [1]."


@pytest.fixture
def server(request):
    servers = []

    def make(**faults):
        servers.append(start(**faults))
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


def ask(server, monkeypatch, caps=None, decide_retrieval=False, **env):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    for name, value in {"CRAG_LM_TIMEOUT": "1", **env}.items():
        monkeypatch.setenv(name, value)
    lm = build_lm("openai/fake", api_base=server.base)
    lm.cache = False
    program = CRAG(ListKnowledgeBase([FOUNDING]), web=None, decide_retrieval=decide_retrieval, caps=caps)
    started = time.monotonic()
    with dspy.context(lm=lm):
        result = program(question=QUESTION)
    return result, time.monotonic() - started


FAILING = {
    # fault: (server options, error pattern, requests made, least seconds of back-off)
    "HTTP 500": ({"fault": "500"}, r"LMServerError: \[openai/fake\] the fake model is down after 3 attempt\(s\)",
                 3, 1.5),
    "HTTP 429 for ever": ({"fault": "429", "retry_after": 0.2},
                          r"LMRateLimitError: \[openai/fake\] rate limited after 3 attempt\(s\)", 3, 0.4),
    "timeout": ({"fault": "timeout", "hang": 3},
                r"LMTransportError: \[openai/fake\] read timed out.* after 3 attempt\(s\)", 3, 3 + 1.5),
    "body cut off": ({"fault": "bad-body"}, r"LMProviderError: .* after 3 attempt\(s\)", 3, 1.5),
}


@pytest.mark.parametrize("name", sorted(FAILING))
def test_a_failing_lm_is_retried_boundedly_then_named_in_one_error(name, server, monkeypatch):
    options, pattern, requests, backoff = FAILING[name]
    srv = server(**options)
    embed(["warm up"])  # the set-aside's embedder loads once per process: not the LM's time (seconds on a busy CPU)
    started = time.monotonic()
    with pytest.raises(LMServiceError) as caught:
        ask(srv, monkeypatch)
    elapsed = time.monotonic() - started
    message = str(caught.value)
    assert "\n" not in message and re.fullmatch(rf"the language model at {re.escape(srv.base)} failed: {pattern}",
                                                message), message
    assert srv.requests == requests  # the first attempt and two retries, then nothing more (no JSON fallback call)
    assert backoff <= elapsed < backoff + 5


def test_a_rate_limit_that_clears_is_answered_after_the_retry_after_wait(server, monkeypatch):
    srv = server(fault="429", fault_calls=2, retry_after=0.3)
    result, elapsed = ask(srv, monkeypatch)
    assert result.answer == ANSWER and not result.fallback
    assert [c["cap"] for c in result.trace.caps_hit] == ["lm_retries", "lm_retries"]
    assert ("waited 0.30 s" in result.trace.caps_hit[0]["detail"]
            and "LMRateLimitError" in result.trace.caps_hit[0]["detail"])
    assert srv.requests == srv.calls + 2 and elapsed >= 0.6


def test_a_retry_after_beyond_the_question_deadline_stops_the_question_at_once(server, monkeypatch):
    srv = server(fault="429", retry_after=3600)
    result, elapsed = ask(srv, monkeypatch, caps=QuestionCaps(seconds=5))
    assert result.fallback and elapsed < 3
    assert result.trace.caps_hit[-1] == {"cap": "seconds", "limit": 5,
                                         "detail": "reached while waiting to retry an LM call"}
    assert any("stopped: seconds cap of 5 reached while waiting to retry an LM call" in e for e in result.trace.events)


def test_a_server_retry_after_is_capped_by_max_wait(server, monkeypatch):
    from program.lm.retry import RetryingLM

    srv = server(fault="429", retry_after=3600)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    lm = RetryingLM("openai/fake", api_base=srv.base, retries=1, max_wait=0.2, cache=False)
    started = time.monotonic()
    with pytest.raises(LMServiceError, match="rate limited after 2 attempt"):
        with dspy.context(lm=lm):
            CRAG(ListKnowledgeBase([FOUNDING]), web=None)(question=QUESTION)
    assert time.monotonic() - started < 3 and srv.requests == 2


MISBEHAVING = ["empty", "truncated", "out-of-range", "garbage"]


@pytest.mark.parametrize("fault", ["empty", "garbage"])
def test_a_draft_that_does_not_parse_gives_a_degraded_answer_with_its_reason(fault, server, monkeypatch):
    """A model that answers nothing parseable (every call): the draft cannot be read, so nothing
    was written; the question ends with the honest fallback and the reason in the trace, never an
    exception (as the passage grader's unparseable output did when it was the first call)."""
    srv = server(fault=fault)
    result, _ = ask(srv, monkeypatch)
    assert result.fallback and result.answer == "I don't have reliable information on this."
    assert any("unparseable" in e for e in result.trace.events)


def test_a_truncated_draft_does_not_hold_up(server, monkeypatch):
    """Every reply cut in half: the draft parses as half an answer ("Acme Rockets was found"), none
    of whose own words stand in its passage, so it does not hold up however sure the reader was;
    the correction's answer is cut too, and the program declines with its reason."""
    srv = server(fault="truncated")
    result, _ = ask(srv, monkeypatch)
    assert result.draft == "Acme Rockets was found" and result.draft_checks["support"] == 0.0
    assert result.action.value == "incorrect" and not result.retried
    assert result.fallback and result.answer == "I don't have reliable information on this."
    assert result.trace.events[-1].startswith("declined: ")
    # every request answered cut, none answered whole
    assert result.trace.lm_calls == srv.requests and srv.calls == 0


def test_out_of_range_booleans_reach_no_judgment_on_the_drafts_route(server, monkeypatch):
    """Every true/false field answered "maybe": the draft has none, the passages are scored without
    the LM and the claim is supported by its words, so the answer is the sound one in one call."""
    srv = server(fault="out-of-range")
    result, _ = ask(srv, monkeypatch)
    assert result.answer == ANSWER and not result.fallback and result.action.value == "correct"
    assert result.trace.lm_calls == srv.requests == 1


@pytest.mark.parametrize("fault", MISBEHAVING)
def test_misbehaving_output_degrades_only_the_judgment_it_reached(fault, server, monkeypatch):
    """The retrieval decider's two tries (chat, then DSPy's JSON fallback) misbehave: it retrieves,
    as for any answer it cannot parse, and the draft after them is sound."""
    srv = server(fault=fault, fault_calls=2)
    result, _ = ask(srv, monkeypatch, decide_retrieval=True)
    assert "decide-retrieval: unparseable output (AdapterParseError); retrieving" in result.trace.events
    assert not result.retrieval_skipped and result.action.value == "correct"
    assert result.answer == ANSWER and not result.fallback
    assert [(s.step, s.lm_calls) for s in result.trace.steps][:4] == [("decide-retrieval", 2), ("retrieve", 0),
                                                                       ("evaluate", 0), ("draft", 1)]
    assert result.trace.lm_calls == 3 and srv.calls == 1


def test_ask_exits_2_naming_the_endpoint_when_the_lm_is_down(server, tmp_path):
    from tests.service_process import ROOT, program_env, write_docs

    srv = server(fault="500")
    docs = write_docs(tmp_path / "docs")
    run = subprocess.run([sys.executable, "-m", "program", "ask", QUESTION, "--model", "openai/fake", "--api-base",
                          srv.base,
                          "--kb", str(docs), "--compiled", "none", "--web", "none", "--no-cache"],
                         cwd=ROOT, env=program_env(tmp_path / "cache", CRAG_LM_RETRIES="1"), capture_output=True,
                         text=True,
                         timeout=300)
    assert run.returncode == 2 and run.stdout == ""
    last = run.stderr.strip().splitlines()[-1]
    assert last == (f"error: the language model at {srv.base} failed: LMServerError: "
                    f"[openai/fake] the fake model is down "
                    "after 2 attempt(s)"), run.stderr
    assert "Traceback" not in run.stderr and srv.requests == 2
