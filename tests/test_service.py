"""`python -m program serve` as a real process: POST /ask, POST /ask/stream, /healthz, errors,
disconnects and a failing LM, asked with a real HTTP client."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx
import pytest

from program.app.service.public import public
from tests.service_process import ROOT, program_env, read_events

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

Q = "Who founded Acme Rockets?"
# the draft (the first "answer") is written before the action is decided on it; the passages are
# read whole, so no "strips" event; the claim check and the cited answer follow
# the served model streams its draft a word at a time
DRAFT_WORDS = ["Acme", " Rockets", " was", " founded", " by", " Jane", " Roe", " [1]."]
STEPS = ["question", "retrieved", "graded", *["words"] * len(DRAFT_WORDS), "answer", "action", "claims", "answer",
         "result", "done"]


def _timeless(value):
    """The result without its clock readings (seconds per step), which differ run to run, and the
    tokens the model server's prefix cache held, which depend on what it was asked before (a
    test run alone got 0 from the service and 182 from the command that asked after it)."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k not in ("seconds", "t", "time", "cached_tokens")}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_ask_returns_the_whole_result_as_ask_json_does(service, served_fake_lm):
    response = httpx.post(f"{service.base}/ask", json={"question": Q}, timeout=60)
    assert response.status_code == 200 and len(response.headers["x-request-id"]) == 12
    result = response.json()
    assert result["answer"] == "Acme Rockets was founded by Jane Roe [1]."
    assert result["action"] == "correct" and result["citations"][0]["source_id"] == "acme.md#0"
    assert [(c["support"], c["kept"]) for c in result["claims"]] == [("fully", True)]
    assert result["trace"]["lm_calls"] == sum(s["lm_calls"] for s in result["trace"]["steps"]) > 0

    cli = subprocess.run([sys.executable, "-m", "program", "ask", Q, "--json", "--model", "openai/fake",
                          "--api-base", served_fake_lm.base, "--kb", str(service.docs), "--compiled", "none",
                          "--web", "none", "--no-cache"], cwd=ROOT,
                         env=program_env(service.root / "cli-cache"),  # every LM call made, as the service
                         capture_output=True, text=True, timeout=180)
    assert cli.returncode == 0, cli.stderr
    # the same result, but a client is not told where the documents are on the server
    assert _timeless(public(json.loads(cli.stdout))) == _timeless(result)
    assert json.loads(cli.stdout)["citations"][0]["url"] == str(service.docs / "acme.md")
    assert result["citations"][0]["url"] == ""

    text = subprocess.run([sys.executable, "-m", "program", "ask", Q, "--model", "openai/fake",
                           "--api-base", served_fake_lm.base, "--kb", str(service.docs), "--compiled", "none",
                           "--web", "none", "--no-cache"], cwd=ROOT, env=program_env(service.root / "cli-cache"),
                          capture_output=True, text=True, timeout=180)
    assert text.returncode == 0, text.stderr
    cited = result["citations"][0]
    assert text.stdout.splitlines()[0] == result["answer"]
    assert f"[1] acme.md#0 \u2014 {cited['title']} <{service.docs / 'acme.md'}>" in text.stdout.splitlines()


def test_the_stream_sends_each_step_in_order_then_the_result_and_done(service):
    with httpx.stream("POST", f"{service.base}/ask/stream", json={"question": Q}, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = read_events(response)
    assert [name for name, _ in events] == STEPS
    # the served model's draft, word by word as DSPy streams it, before its answer event
    assert [(e["stage"], e["text"]) for name, e in events if name == "words"] == [("draft", w) for w in DRAFT_WORDS]
    data = dict(events)
    assert data["question"]["question"] == Q
    assert [p["id"] for p in data["retrieved"]["passages"]] == ["acme.md#0", "danube.md#0"]
    # no trained judge, no LM grade: a passage's score is its retrieval similarity (a negative cosine is 0)
    acme, danube = data["graded"]["grades"]
    assert (acme["passage_id"], acme["reason"], danube["passage_id"], danube["score"], danube["reason"]) == \
        ("acme.md#0", "relevant", "danube.md#0", 0.0, "irrelevant")
    assert 0.6 <= acme["score"] <= 1.0 and acme["explanation"] == f"retrieval similarity {acme['score']:.3f}"
    assert (data["graded"]["lower"], data["graded"]["upper"]) == (0.2, 0.6)
    # the action comes from the decision on the draft: its confidence against accept (no upper threshold)
    action = data["action"]
    assert (action["action"], action["accept"], action["lower"]) == ("correct", 0.5, 0.2) and "upper" not in action
    assert action["reasons"][0].startswith("the draft holds up: confidence ")
    assert action["confidence"] == data["result"]["result"]["confidence"] >= 0.5
    assert data["claims"]["claims"][0]["support"] == "fully"
    assert data["result"]["result"]["answer"] == data["answer"]["answer"] == "Acme Rockets was founded by Jane Roe [1]."
    # the last answer event is the cited one: the same citations as the result's
    first, cited = [e for name, e in events if name == "answer"]
    assert "cited" not in first and cited["cited"] is True
    # no log probabilities served
    assert first["answer"] == data["result"]["result"]["draft"] and first["probability"] is None
    assert cited["citations"] == data["result"]["result"]["citations"]
    assert [(c["number"], c["source_id"], c["sentences"]) for c in cited["citations"]] == [(1, "acme.md#0", [0])]
    assert cited["sentences"] == [{"text": "Acme Rockets was founded by Jane Roe.", "cited": [1], "supported": True,
                                   "by": "model"}]
    times = [e["t"] for name, e in events if name != "done"]
    assert times == sorted(times)
    assert len({e["request"] for _, e in events}) == 1


def test_an_off_topic_retrieval_streams_the_correction(service):
    with httpx.stream("POST", f"{service.base}/ask/stream", json={"question": "Where does the Danube flow?", "k": 1},
                      timeout=60) as response:
        events = read_events(response)
    words = {}
    for name, e in events:
        if name == "words":
            words[e["stage"]] = words.get(e["stage"], "") + e["text"]
    events = [(name, e) for name, e in events if name != "words"]
    names = [name for name, _ in events]
    assert names[:5] == ["question", "retrieved", "graded", "answer", "action"] and names[-2:] == ["result", "done"]
    # the words a client saw as they were written: the draft's, then the corrected answer's, later declined
    assert words == {"draft": "I don't know.", "corrected": "Acme Rockets was founded by Jane Roe [1]."}
    data = dict(events)
    # the fake reader finds no founder in the Danube page: its draft abstains, so the action is incorrect
    assert data["action"]["action"] == "incorrect" and data["action"]["reasons"] == [
        "the draft says the passages do not answer"]
    assert data["rewrite"]["query"] == "Acme Rockets founder" and names.index("rewrite") > names.index("action")
    retrieved = [e for name, e in events if name == "retrieved"]
    assert [(e["stage"], [p["id"] for p in e["passages"]]) for e in retrieved] == \
        [("initial", ["danube.md#0"]), ("corrected", ["acme.md#0"])]  # the rewritten query found the Acme page
    # the answer written from it is about Acme, not the Danube (premise and coverage 0): declined
    result = data["result"]["result"]
    assert result["outcome"]["ending"] == "declined"
    assert result["answer"] == "I don't have reliable information on this."
    assert result["outcome"]["declined"] == "Acme Rockets was founded by Jane Roe [1]." and result["confidence"] < 0.5
    assert result["citations"] == []
    # who judged: no trained judge, so passages by retrieval similarity and the rest by the LM
    assert data["result"]["result"]["trace"]["judges"]["adapted"] is False
    assert data["result"]["result"]["trace"]["judges"]["judgments"] == \
        {"passage": "similarity", "strip": "lm", "support": "lm", "usefulness": "lm"}


@pytest.mark.parametrize("body, status, message", [
    ({"question": "   "}, 422, "question: the question is empty"),
    ({"question": "x" * 2001}, 422, "question: the question has 2001 characters; the limit is 2000"),
    ({"question": Q, "k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ({"question": Q, "web": "altavista"}, 422, "web: Input should be"),
    ({"question": Q, "colour": "blue"}, 422, "colour: unknown option"),
    ({"question": Q, "web": "tavily"}, 422, "web: Input should be 'none'"),  # not the server's backend
    ({}, 422, "question: Field required"),
    # the bug: an option named with a newline made a two-line error (schemathesis found it)
    ({"\n": 1}, 422, "question: Field required; \\n: unknown option"),
])
@pytest.mark.parametrize("path", ["/ask", "/ask/stream"])
def test_bad_requests_get_a_clear_4xx(service, path, body, status, message):
    response = httpx.post(f"{service.base}{path}", json=body, timeout=30)
    assert response.status_code == status
    assert response.json()["detail"].startswith(message)


def test_an_oversized_or_malformed_body_is_refused(service):
    big = httpx.post(f"{service.base}/ask", content=b'{"question": "' + b"x" * 40_000 + b'"}',
                     headers={"content-type": "application/json"}, timeout=30)
    assert big.status_code == 413 and big.json()["detail"] == "the request body is over the 16384-byte limit"
    chunked = httpx.post(f"{service.base}/ask", content=iter([b'{"question": "', b"x" * 20_000, b'"}']),
                         headers={"content-type": "application/json"}, timeout=30)
    assert chunked.status_code == 413
    broken = httpx.post(f"{service.base}/ask", content=b'{"question": ', headers={"content-type": "application/json"})
    assert broken.status_code == 422 and broken.json()["detail"] == "the body is not valid JSON"


def test_healthz_names_the_lm_knowledge_base_compile_and_queue(service):
    health = httpx.get(f"{service.base}/healthz").json()
    assert health["status"] == "ready" and health["lm"] == "openai/fake" and health["embedded_lm"] is False
    built = health["knowledge_base"].pop("built")
    assert built.endswith("+00:00") and built[:4].isdigit()  # when the build serving was made, UTC
    # the folder's name, not its path; its chunks and documents; no new build switched to since start
    assert health["knowledge_base"] == {"name": "docs", "model": "docs", "chunks": 2, "documents": 2, "reloads": 0}
    assert health["compiled"] is None and health["web"] == "none"
    assert health["queue"] == {"running": 0, "waiting": 0, "concurrency": 8, "max_queue": 64}
    assert health["judges"] == {"judgments": {"passage": "similarity", "strip": "lm", "support": "lm",
                                              "usefulness": "lm"},
                                "adapted": False, "corpus": "", "calibrated_here": False}
    assert httpx.get(f"{service.base}/openapi.json").json()["paths"].keys() >= {"/ask", "/ask/stream", "/healthz"}
    assert httpx.get(f"{service.base}/docs").status_code == 200


def test_the_trace_file_has_one_line_per_step_of_each_question(service):
    response = httpx.post(f"{service.base}/ask", json={"question": "Who founded Acme Rockets, please?"}, timeout=60)
    request = response.headers["x-request-id"]
    lines = [json.loads(line) for line in service.trace.read_text().splitlines()]
    mine = [line for line in lines if line.get("request") == request]
    # "done" belongs to the stream, not to the trace; the audit line goes to the trace, not to the stream
    assert [line["event"] for line in mine] == STEPS[:-2] + ["audit", "result"]
    assert mine[-2] == {"event": "audit", "request": request, "key": "anyone", "knowledge_base": "docs",
                        "filter": None, "outcome": mine[-1]["result"]["outcome"]["ending"],
                        "cited": sorted({c["source_id"].rsplit("#", 1)[0] for c in mine[-1]["result"]["citations"]})}


def test_a_client_that_disconnects_stops_its_question(service, served_fake_lm):
    served_fake_lm.delay = 1.0  # each LM call now takes 1 s: the draft under way when the client hangs up, too
    try:
        with httpx.stream("POST", f"{service.base}/ask/stream", json={"question": "Who founded Acme Rockets, then?"},
                          timeout=30) as response:
            for line in response.iter_lines():
                if line.startswith("event: graded"):
                    break  # hang up after the passages are scored, as the draft's call starts
        calls = served_fake_lm.calls
        time.sleep(2.5)
        # the draft's call already under way may finish; nothing after it starts
        assert served_fake_lm.calls - calls <= 1
        assert httpx.get(f"{service.base}/healthz").json()["queue"]["running"] == 0
    finally:
        served_fake_lm.delay = 0.01
    events = [json.loads(line) for line in service.trace.read_text().splitlines()]
    request = next(e["request"] for e in events if e.get("question") == "Who founded Acme Rockets, then?")
    mine = [e for e in events if e.get("request") == request]
    names = [e["event"] for e in mine]
    assert "action" not in names and "claims" not in names and "result" not in names  # stopped before deciding
    # the trace still closes with the promised error line, and nothing after it
    assert names[-1] == "error" and names.count("error") == 1
    assert (mine[-1]["status"], mine[-1]["detail"]) == (499, "stopped: the client went away")


def test_a_failing_lm_is_a_502_with_the_reason_not_a_hung_connection(service, served_fake_lm):
    served_fake_lm.fail = True
    try:
        started = time.monotonic()
        response = httpx.post(f"{service.base}/ask", json={"question": "Who founded Acme Rockets again?"}, timeout=60)
        assert response.status_code == 502
        request = response.headers["x-request-id"]
        # the client learns that the LM failed and the request id; the operator's log gets the rest
        assert response.json()["detail"] == f"the language model failed; try again later (request {request})"
        assert (f"request {request}: 502 the language model at {served_fake_lm.base} failed: LMServerError: "
                "[openai/fake] the fake model is down after 3 attempt(s)") in service.log.read_text()
        assert time.monotonic() - started < 30
        with httpx.stream("POST", f"{service.base}/ask/stream", json={"question": "And who founded Acme Rockets?"},
                          timeout=60) as stream:
            events = read_events(stream)
        assert [name for name, _ in events][-2:] == ["error", "done"] and dict(events)["error"]["status"] == 502
    finally:
        served_fake_lm.fail = False
    assert httpx.get(f"{service.base}/healthz").json()["failed"] >= 2


def test_each_request_has_its_own_options_on_the_shared_program(service, tight_service):
    ask = lambda server, body: httpx.post(f"{server.base}/ask", json=body, timeout=60).json()  # noqa: E731
    # retrieve-or-not where the operator turned it on (tight_service): on by default, off on request
    greeting = ask(tight_service, {"question": "Hi there!"})
    assert greeting["retrieval_skipped"] is True and greeting["action"] is None and greeting["grades"] == []
    retrieved = ask(tight_service, {"question": "Hi there!", "decide_retrieval": False})
    assert retrieved["retrieval_skipped"] is False and len(retrieved["grades"]) == 2
    unchecked = ask(service, {"question": "Who founded Acme Rockets? (no check)", "self_check": False, "k": 1})
    assert unchecked["mode"] == "crag" and unchecked["claims"] == [] and len(unchecked["grades"]) == 1
    default = ask(service, {"question": "Hi there, who founded Acme Rockets?"})  # the server's settings are untouched
    assert default["retrieval_skipped"] is False and default["mode"] == "self-crag" and len(default["grades"]) == 2
