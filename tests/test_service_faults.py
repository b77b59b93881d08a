"""Faults of ``serve`` as a real process, and what its answers tell a client: a short message and
a request id, never a server path, an internal address, an environment variable's name or an
upstream body (every response body below is scanned); the operator's log has the detail.

``tight_service``: ``--web snapshot -k 2 --concurrency 1 --max-queue 0 --timeout 3 --read-timeout 1``.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time

import httpx
import pytest

from tests.service_process import ROOT

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

UPSTREAM = "the fake model is down"  # the served fake LM's error body
ENV_NAME = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]*[A-Z0-9]\b")  # TAVILY_API_KEY, CRAG_CACHE_DIR ...


def assert_nothing_internal(text: str, *secrets: str) -> None:
    """No path of the server, internal URL, variable name or upstream body in a response body."""
    for secret in (str(ROOT), "/tmp/", "/home/", "/work/", "/root/", "127.0.0.1", "localhost", "http://", "https://",
                   UPSTREAM, *secrets):
        assert secret not in text, f"{secret!r} in {text[:400]!r}"
    assert not ENV_NAME.search(text), f"{ENV_NAME.search(text).group()!r} in {text[:400]!r}"


def _stream_text(base: str, body: dict) -> str:
    with httpx.stream("POST", f"{base}/ask/stream", json=body, timeout=60) as response:
        return response.read().decode()


def test_a_failing_lm_tells_the_client_it_failed_and_no_more(service, served_fake_lm):
    served_fake_lm.fail = True
    try:
        response = httpx.post(f"{service.base}/ask", json={"question": "Who founded Acme Rockets, said the LM?"},
                              timeout=60)
        stream = _stream_text(service.base, {"question": "Who founded Acme Rockets, asked the stream?"})
    finally:
        served_fake_lm.fail = False
    request = response.headers["x-request-id"]
    assert response.status_code == 502 and response.json()["detail"].startswith("the language model failed")
    assert "event: error" in stream and '"status":502' in stream.replace(" ", "")
    for text in (response.text, stream):
        assert_nothing_internal(text, served_fake_lm.base, str(service.root))
    log = service.log.read_text()
    assert f"request {request}: 502 the language model at {served_fake_lm.base} failed" in log
    assert UPSTREAM in log


@pytest.mark.parametrize("body", [{"question": "Who?", "web": "tavily"}, {"question": "Who?", "web": "brave"},
                                  {"question": "Who?", "k": 99}, {"question": "\u200b"}, {"kb": "/etc"}])
def test_a_refused_request_names_no_variable_or_path(service, body):
    response = httpx.post(f"{service.base}/ask", json=body, timeout=30)
    assert response.status_code == 422
    assert_nothing_internal(response.text, str(service.root))


def test_oversized_and_unparseable_bodies_name_nothing_internal(service):
    for content in (b'{"question": "' + b"x" * 40_000 + b'"}', b'{"question": ', b"\xff"):
        response = httpx.post(f"{service.base}/ask", content=content, headers={"content-type": "application/json"},
                              timeout=30)
        assert response.status_code in (413, 422)
        assert_nothing_internal(response.text, str(service.root))


@pytest.mark.parametrize("which", ["service", "tight_service"])
def test_healthz_says_ready_with_names_not_paths(which, request, served_fake_lm):
    server = request.getfixturevalue(which)
    health = httpx.get(f"{server.base}/healthz").json()
    kb = {k: v for k, v in health["knowledge_base"].items() if k != "built"}
    assert health["status"] == "ready" and kb == {"name": "docs", "model": "docs", "chunks": 2, "documents": 2,
                                                  "reloads": 0}
    assert health["web"] == ("none" if which == "service" else "snapshot")
    assert_nothing_internal(httpx.get(f"{server.base}/healthz").text, str(server.root), str(server.docs),
                            served_fake_lm.base)


def _idle(server) -> None:
    deadline = time.monotonic() + 15
    while httpx.get(f"{server.base}/healthz").json()["queue"]["running"] and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_slow_question_is_a_504_and_no_room_is_a_503(tight_service, served_fake_lm):
    served_fake_lm.delay = 5.0  # past the operator's --timeout 3
    slow: dict = {}
    thread = threading.Thread(target=lambda: slow.update(r=httpx.post(
        f"{tight_service.base}/ask", json={"question": "Who founded Acme Rockets, slowly?"}, timeout=60)))
    try:
        thread.start()
        time.sleep(1.0)
        busy = httpx.get(f"{tight_service.base}/healthz").json()
        full = httpx.post(f"{tight_service.base}/ask", json={"question": "Who founded Acme Rockets, too?"}, timeout=30)
        thread.join(30)
    finally:
        served_fake_lm.delay = 0.01
    assert busy["status"] == "busy" and busy["queue"]["running"] == 1
    assert full.status_code == 503 and full.json()["detail"].startswith("busy: ")
    assert slow["r"].status_code == 504 and slow["r"].json()["detail"].startswith("the question took more than 3 s")
    request = slow["r"].headers["x-request-id"]
    audit = [line for line in tight_service.log.read_text().splitlines() if "program.audit" in line and request in line]
    assert len(audit) == 1 and json.loads(audit[0].split("program.audit: ", 1)[1]) == {
        "request": request, "key": "anyone", "knowledge_base": "docs", "filter": None, "outcome": "error 504",
        "cited": []}  # a question that failed leaves its audit line too
    for response in (full, slow["r"]):
        assert_nothing_internal(response.text, str(tight_service.root), served_fake_lm.base)
    _idle(tight_service)


def test_a_body_announced_and_never_sent_is_cut_off(tight_service):
    port = int(tight_service.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 40\r\n\r\n")
        started, data = time.monotonic(), b""
        while chunk := conn.recv(4096):  # until the server closes the connection
            data += chunk
        waited = time.monotonic() - started
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and 0.9 <= waited < 5, (head, waited)
    assert body == b'{"detail":"the request body did not arrive within 1 s"}'
    assert_nothing_internal(body.decode(), str(tight_service.root))
