"""What a second black-box probe of ``serve`` found, each with its input, against one real process
(a key, wildcard ``--allowed-hosts``, the served fake LM on loopback): a lone surrogate in a chat
message, wildcard hosts, a request head over 16 KB in one read, ``/healthz`` without the key, and
FastAPI's "Duplicate Operation ID" warning. The refusals of ``--allowed-hosts`` values that could
never match are in ``tests/test_serve_flags.py``."""

from __future__ import annotations

import json
import socket

import httpx
import pytest

pytestmark = pytest.mark.slow  # starts a server: left out of the inner loop

KEY = "hardening-test-key-0123"
AUTH = {"Authorization": f"Bearer {KEY}"}
LIMIT = 16 * 1024


@pytest.fixture(scope="module")
def server(served_fake_lm, tmp_path_factory):
    """``serve`` with a key, answering for ``.example.com`` and ``*.corp.test`` besides loopback."""
    from tests.service_process import ServiceProcess, program_env, write_docs

    root = tmp_path_factory.mktemp("hardening")
    docs = write_docs(root / "docs")
    process = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                              "--compiled", "none", "--web", "none", "--no-cache",
                              "--allowed-hosts", ".example.com, *.corp.test"],
                             program_env(root / "cache", CRAG_SERVE_API_KEY=KEY), root / "serve.log")
    process.docs = docs
    yield process
    process.stop()


def _failed(server) -> int:
    return httpx.get(f"{server.base}/healthz", headers=AUTH).json()["failed"]


# the JSON text a client sends: "\ud800" is the six characters of JSON's escape, a lone surrogate once parsed
LAST = '[{"role": "user", "content": "Who \\ud800 founded?"}]'
EARLIER = ('[{"role": "user", "content": "What does Acme \\ud800 build?"}, '
           '{"role": "assistant", "content": "Small sounding rockets [1]."}, '
           '{"role": "user", "content": "Who founded it?"}]')
PART = ('[{"role": "user", "content": [{"type": "text", "text": "Who founded"}, '
        '{"type": "text", "text": "Acme \\ud800?"}]}]')
SURROGATE = [
    (LAST, False, "messages.0.content: the message holds the lone surrogate U+D800 at position 5: not Unicode text"),
    (EARLIER, False, "messages.0.content: the message holds the lone surrogate U+D800 at position 16: "
                     "not Unicode text"),
    (LAST, True, "messages.0.content: the message holds the lone surrogate U+D800 at position 5: not Unicode text"),
    (PART, False, "messages.0.content: part 2 holds the lone surrogate U+D800 at position 6: not Unicode text"),
    ('[{"role": "assistant", "content": "Hi\\u001b[2J"}, {"role": "user", "content": "Who founded Acme?"}]', False,
     "messages.0.content: the message holds the control character U+001B at position 3"),
]


@pytest.mark.parametrize("messages, stream, detail", SURROGATE, ids=["last", "earlier", "streamed", "part", "control"])
def test_a_lone_surrogate_in_any_chat_message_is_a_422_naming_it(server, served_fake_lm, messages, stream, detail):
    # was: 500 "internal error" (last), 502 blaming the LM (earlier turn), 200 and an error chunk (streamed)
    failed, calls = _failed(server), served_fake_lm.requests
    body = f'{{"model": "docs", "stream": {json.dumps(stream)}, "messages": {messages}}}'
    response = httpx.post(f"{server.base}/v1/chat/completions", content=body, timeout=30,
                          headers={**AUTH, "Content-Type": "application/json"})
    assert response.status_code == 422 and response.headers["content-type"] == "application/json", response.text
    assert response.json()["detail"] == detail
    assert response.json()["error"] == {"message": detail, "type": "invalid_request_error", "code": 422}
    assert _failed(server) == failed and served_fake_lm.requests == calls  # refused before any work
    # /ask refuses the same text (pydantic's strict str)
    asked = httpx.post(f"{server.base}/ask", content='{"question": "Who \\ud800 founded?"}', timeout=30,
                       headers={**AUTH, "Content-Type": "application/json"})
    assert asked.status_code == 422


@pytest.mark.parametrize("host", ["example.com", "api.example.com", "a.b.example.com:8443", "x.corp.test",
                                  "corp.test", "localhost:1"])
def test_a_host_a_wildcard_names_is_served(server, host):
    response = httpx.get(f"{server.base}/v1/models", headers={**AUTH, "Host": host,
                                                               "Origin": f"https://{host.split(':')[0]}"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("host", ["badexample.com", "example.com.evil.org", "corp.test.evil.org", "evil.org"])
def test_a_host_no_wildcard_names_is_still_refused(server, host):
    response = httpx.get(f"{server.base}/v1/models", headers={**AUTH, "Host": host})
    assert response.status_code == 400
    assert response.json()["detail"] == f"host {host!r} is not served here (serve --allowed-hosts adds names)"
    origin = httpx.get(f"{server.base}/v1/models", headers={**AUTH, "Origin": f"https://{host}"})
    assert origin.status_code == 403


def _raw(server, head: bytes) -> tuple[bytes, bytes]:
    """Send ``head`` in one ``sendall``; the response's head and body once the server closes."""
    port = int(server.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    first, _, body = data.partition(b"\r\n\r\n")
    return first, body


def _head(size: int) -> bytes:
    start = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nX-Padding: "
    return start + b"a" * (size - len(start) - 4) + b"\r\n\r\n"


def test_a_head_over_16_kb_in_one_read_is_a_400(server):
    head = _head(20_000)
    assert len(head) == 20_000
    first, body = _raw(server, head)  # was: 200 (h11 caps only what it buffers of an incomplete head)
    assert first.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in first.lower()
    assert json.loads(body) == {"detail": "the request line and headers are over the 16384-byte limit"}
    first, body = _raw(server, _head(LIMIT + 1))
    assert first.startswith(b"HTTP/1.1 400")


def test_a_head_just_under_16_kb_is_answered(server):
    for size in (16_000, LIMIT):
        first, body = _raw(server, _head(size))
        assert first.startswith(b"HTTP/1.1 200"), first
        assert json.loads(body) == {"status": "ready"}


def test_healthz_without_the_key_says_only_ready_or_busy(server):
    for headers in ({}, {"Authorization": "Bearer wrong-key-0123456789"}):
        bare = httpx.get(f"{server.base}/healthz", headers=headers)
        assert bare.status_code == 200 and bare.json() == {"status": "ready"}  # was: every folder, model, threshold
        assert server.docs.name not in bare.text and "openai" not in bare.text
    head = httpx.head(f"{server.base}/healthz")
    assert head.status_code == 200 and head.content == b""
    full = httpx.get(f"{server.base}/healthz", headers=AUTH).json()
    assert full["status"] == "ready" and full["lm"] and full["thresholds"]
    assert [(kb["name"], kb["model"], kb["chunks"]) for kb in full["knowledge_bases"]] == [("docs", "docs", 2)]
    assert "/healthz" in httpx.get(f"{server.base}/openapi.json", headers=AUTH).json()["paths"]


def test_a_start_warns_no_duplicate_operation_id(server):
    # FastAPI warns as it builds the schema: have it built (the API page asks for it too)
    schema = httpx.get(f"{server.base}/openapi.json", headers=AUTH).json()
    assert set(schema["paths"]["/healthz"]) == {"get", "head"}
    ids = [op["operationId"] for path in schema["paths"].values() for op in path.values()]
    assert len(ids) == len(set(ids))
    assert httpx.get(f"{server.base}/docs", headers=AUTH).status_code == 200
    log = server.log.read_text()
    assert "serving docs on" in log and "Duplicate Operation ID" not in log
