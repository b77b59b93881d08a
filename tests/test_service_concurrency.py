"""Many users at once: 20 questions at the same time against a served fake LM with a per-call
delay all finish, each with its own trace, none mixed up with another."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.service_process import read_events


def _ask(base: str, n: int) -> tuple[str, dict, list]:
    question = f"Who founded Acme Rockets? (asker {n})"
    if n % 2:
        response = httpx.post(f"{base}/ask", json={"question": question}, timeout=120)
        assert response.status_code == 200, response.text
        return question, response.json(), []
    with httpx.stream("POST", f"{base}/ask/stream", json={"question": question}, timeout=120) as response:
        events = read_events(response)
    return question, dict(events)["result"]["result"], events


def test_twenty_questions_at_once_each_get_their_own_answer_and_trace(service, served_fake_lm):
    served_fake_lm.delay = 0.05
    try:
        with ThreadPoolExecutor(20) as pool:
            answers = list(pool.map(lambda n: _ask(service.base, n), range(20)))
    finally:
        served_fake_lm.delay = 0.01
    for question, result, events in answers:
        assert result["question"] == question
        assert result["answer"] == "Acme Rockets was founded by Jane Roe [1]."
        steps = {s["step"]: s["lm_calls"] for s in result["trace"]["steps"]}
        # its own LM calls only: the draft holds up (passages scored without the LM, the claim by its words)
        assert steps == {"retrieve": 0, "evaluate": 0, "draft": 1, "decide": 0, "self-check": 0, "cite": 0}
        assert result["trace"]["lm_calls"] == 1 and result["action"] == "correct"
        if events:
            assert {e["request"] for _, e in events} == {events[0][1]["request"]}
            assert events[0][1]["question"] == question and events[-2][1]["lm_calls"] == 1
    trace = [json.loads(line) for line in service.trace.read_text().splitlines()]
    by_request: dict[str, list[dict]] = {}
    for event in trace:
        by_request.setdefault(event["request"], []).append(event)
    asked = {q for q, _, _ in answers}
    mine = {events[0]["question"]: events for events in by_request.values() if events[0].get("question") in asked}
    assert len(mine) == 20
    for question, events in mine.items():
        assert events[-1]["event"] == "result" and events[-1]["result"]["question"] == question
        assert all(e.get("question", question) == question for e in events)
    health = httpx.get(f"{service.base}/healthz").json()
    assert health["queue"]["running"] == 0 and health["queue"]["waiting"] == 0
