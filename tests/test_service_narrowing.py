"""A request may narrow what the server does, never widen it; its body is typed strictly.

Against ``serve`` as a real process: ``service`` (``--web none``, the default ``-k`` 3, no
retrieve-or-not) and ``tight_service`` (``--web snapshot``, ``-k 2``, ``--decide-retrieval``). Every value the general
schema knows for a widening field is tried on both endpoints.
"""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from program.web.config import BACKEND_NAMES
from tests.service_process import ROOT, program_env, read_events

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

Q = "Who founded Acme Rockets?"
WIDER_K = [4, 5, 10, 20, 21, 50]  # the service's -k is 3
WIDENING = ([("web", name) for name in BACKEND_NAMES if name != "none"] + [("k", k) for k in WIDER_K]
            + [("decide_retrieval", True)])


def _post(base: str, path: str, body: dict) -> httpx.Response:
    if path == "/ask":
        return httpx.post(f"{base}{path}", json=body, timeout=60)
    with httpx.stream("POST", f"{base}{path}", json=body, timeout=60) as response:
        response.read()
        return response


@pytest.mark.parametrize("path", ["/ask", "/ask/stream"])
@pytest.mark.parametrize("field, value", WIDENING)
def test_a_request_cannot_widen_the_operators_settings(service, path, field, value):
    answered = httpx.get(f"{service.base}/healthz").json()["answered"]
    response = _post(service.base, path, {"question": Q, field: value})
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(f"{field}: ")
    assert httpx.get(f"{service.base}/healthz").json()["answered"] == answered  # refused before any work


def test_the_schema_offers_only_what_the_operator_allows(service):
    schema = httpx.get(f"{service.base}/openapi.json").json()["components"]["schemas"]["AskRequest"]["properties"]
    assert schema["k"]["anyOf"][0]["maximum"] == 3
    assert schema["web"]["anyOf"][0] == {"const": "none", "type": "string"}
    assert schema["decide_retrieval"]["anyOf"][0] == {"const": False, "type": "boolean"}


@pytest.mark.parametrize("name", [n for n in BACKEND_NAMES if n not in ("none", "snapshot")])
def test_a_server_with_a_web_backend_refuses_every_other(tight_service, name):
    response = httpx.post(f"{tight_service.base}/ask", json={"question": Q, "web": name}, timeout=60)
    assert response.status_code == 422 and response.json()["detail"] == "web: Input should be 'none' or 'snapshot'"
    over = httpx.post(f"{tight_service.base}/ask", json={"question": Q, "k": 3}, timeout=60)
    assert over.status_code == 422 and over.json()["detail"] == "k: Input should be less than or equal to 2"


def test_narrowing_is_answered(tight_service, served_fake_lm):
    served_fake_lm.delay = 0.01
    body = {"question": "Where does the Danube flow?", "k": 1, "web": "none", "self_check": False,
            "decide_retrieval": False}
    with httpx.stream("POST", f"{tight_service.base}/ask/stream", json=body, timeout=60) as response:
        events = read_events(response)
    names = [name for name, _ in events]
    # an off-topic passage takes the correction, but the request turned the web off: no web step
    assert names[-2:] == ["result", "done"] and "rewrite" in names and "web" not in names
    assert len(dict(events)["retrieved"]["passages"]) == 1
    assert dict(events)["result"]["result"]["claims"] == []


@pytest.mark.parametrize("body", [
    {"question": Q, "k": "3"}, {"question": Q, "k": 2.5}, {"question": Q, "k": True}, {"question": Q, "self_check": 1},
    {"question": Q, "self_check": "true"}, {"question": Q, "decide_retrieval": "yes"},
    {"question": Q, "decide_retrieval": 0}, {"question": 42},
])
def test_options_of_another_json_type_are_refused(service, body):
    response = httpx.post(f"{service.base}/ask", json=body, timeout=60)
    assert response.status_code == 422, response.text
    field = next(k for k, v in body.items() if k != "question" or not isinstance(v, str))
    assert response.json()["detail"].startswith(f"{field}: ")


def test_a_whole_number_written_with_a_zero_fraction_is_a_whole_number(service):
    # JSON Schema's "integer" takes 1.0; the schema fuzzer sent it and got a 422 (a bug)
    response = httpx.post(f"{service.base}/ask", json={"question": "Who founded Acme Rockets?", "k": 1.0}, timeout=60)
    assert response.status_code == 200, response.text
    assert len(response.json()["grades"]) == 1


@pytest.mark.parametrize("question", ["\u200b\u200b", " \u200b\u200d\ufeff ", "\u200e"])
def test_a_question_of_invisible_characters_is_empty(service, question):
    response = httpx.post(f"{service.base}/ask", json={"question": question}, timeout=60)
    assert response.status_code == 422
    assert response.json()["detail"] == "question: the question is empty (only invisible characters)"


@pytest.mark.parametrize("content", [b"\xff\xfe{}", b'{"question": "caf\xe9?"}', b"[1, 2]", b"", b"null"])
def test_a_body_that_does_not_parse_is_a_422(service, content):
    response = httpx.post(f"{service.base}/ask", content=content, headers={"content-type": "application/json"},
                          timeout=30)
    assert response.status_code == 422, response.text
    assert "\n" not in response.json()["detail"]


def test_k_has_one_range_on_the_command_line_and_over_http(service, served_fake_lm):
    common = ["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(service.docs),
              "--compiled", "none", "--web", "none"]
    run = subprocess.run([sys.executable, "-m", "program", "ask", Q, "-k", "21", *common], cwd=ROOT,
                         env=program_env(service.root / "cli-cache"), capture_output=True, text=True, timeout=180)
    assert (run.returncode, run.stderr) == (2, "error: -k must be at least 1 and at most 20, got 21\n")
    schema = httpx.get(f"{service.base}/openapi.json").json()["components"]["schemas"]["AskRequest"]
    assert schema["properties"]["k"]["anyOf"][0]["maximum"] <= 20
