"""What a black-box probe of ``serve`` found, each with its input, against the service as a real
process (the served fake LM on loopback): slow and idle connections, uvicorn's own errors,
deeply nested JSON, a link out of the knowledge-base folder, a knowledge base that is not there."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

from tests.service_process import ROOT, ServiceProcess, program_env, write_docs

pytestmark = pytest.mark.slow  # starts servers and subprocesses: left out of the inner loop

SECRET = "The vault code is 4417-alpha."


def _port(server) -> int:
    return int(server.base.rsplit(":", 1)[1])


def _until_closed(conn: socket.socket) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection, and how long that took."""
    started, data = time.monotonic(), b""
    while chunk := conn.recv(4096):
        data += chunk
    return data, time.monotonic() - started


def test_a_connection_that_sends_nothing_is_closed(tight_service):
    # 200 of these stayed open past 75-120 s; the tight service gives a request 1 s
    conns = [socket.create_connection(("127.0.0.1", _port(tight_service)), timeout=10) for _ in range(20)]
    try:
        for conn in conns:
            data, waited = _until_closed(conn)
            assert data == b"" and waited < 5
    finally:
        for conn in conns:
            conn.close()


def test_headers_sent_a_byte_every_two_seconds_are_cut_off_with_a_408(tight_service):
    with socket.create_connection(("127.0.0.1", _port(tight_service)), timeout=10) as conn:
        conn.sendall(b"G")
        time.sleep(0.6)
        conn.sendall(b"E")
        data, waited = _until_closed(conn)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and waited < 5
    assert json.loads(body) == {"detail": "the request line and headers did not arrive within 1 s"}


def test_a_body_sent_a_byte_at_a_time_is_cut_off_at_the_whole_bodys_deadline(tight_service):
    body = json.dumps({"question": "Who founded Acme Rockets?"}).encode()
    sent = threading.Event()

    def trickle(conn):  # a byte every 0.6 s: each within the 1 s, the whole body not
        try:
            for byte in body[:6]:
                conn.sendall(bytes([byte]))
                time.sleep(0.6)
        except OSError:  # the server hung up, as it should
            pass
        sent.set()

    with socket.create_connection(("127.0.0.1", _port(tight_service)), timeout=10) as conn:
        conn.sendall(b"POST /ask HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     + f"Content-Length: {len(body)}\r\n\r\n".encode())
        sender = threading.Thread(target=trickle, args=(conn,), daemon=True)
        sender.start()
        data = conn.recv(4096)
        trickling = not sent.is_set()  # a deadline per part would answer only after the last byte
        try:
            while chunk := conn.recv(4096):
                data += chunk
        except ConnectionResetError:  # the trickle's next byte met the closed connection
            pass
        sender.join(10)
    assert data.startswith(b"HTTP/1.1 408") and trickling, data
    assert b'"the request body did not arrive within 1 s"' in data


def test_a_request_uvicorn_cannot_parse_gets_the_services_error_body(tight_service):
    with socket.create_connection(("127.0.0.1", _port(tight_service)), timeout=10) as conn:
        conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header Line\r\n\r\n")
        data, _ = _until_closed(conn)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower()
    assert json.loads(body)["detail"].startswith("not an HTTP request this server reads")


def test_deeply_nested_json_is_a_422_in_one_line(tight_service):
    nested = "[" * 100_000 + "]" * 100_000
    body = f'{{"question": "Who founded Acme Rockets?", "k": {nested}}}'
    # over the 16 KB cap: 413; within it (a nesting deep enough for any parser): 422, never a 400 or 500
    small = '{"question": "q?", "k": ' + "[" * 5000 + "]" * 5000 + "}"
    for content, status in ((body, 413), (small, 422)):
        response = httpx.post(f"{tight_service.base}/ask", content=content,
                              headers={"content-type": "application/json"}, timeout=30)
        assert response.status_code == status, response.text
        assert "\n" not in response.json()["detail"]


def test_a_link_out_of_the_knowledge_base_is_left_out_and_said(served_fake_lm, tmp_path):
    docs = write_docs(tmp_path / "docs")
    (tmp_path / "vault.md").write_text(f"# Vault\n\n{SECRET}\n")
    (docs / "passwd.md").symlink_to(tmp_path / "vault.md")
    server = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                             "--compiled", "none", "--web", "none", "--no-cache"],
                            program_env(tmp_path / "cache"), tmp_path / "serve.log")
    try:
        assert httpx.get(f"{server.base}/healthz").json()["knowledge_base"]["chunks"] == 2
        answer = httpx.post(f"{server.base}/ask", json={"question": "What is the vault code?"}, timeout=60)
        assert answer.status_code == 200 and "4417" not in answer.text
    finally:
        server.stop()
    log = (tmp_path / "serve.log").read_text()
    assert f"note: left out passwd.md: links outside the knowledge base (to {tmp_path / 'vault.md'}); " \
           "CRAG_OUTSIDE_LINKS=follow reads it" in log


def test_a_knowledge_base_that_is_not_there_is_named_so(tmp_path):
    run = subprocess.run([sys.executable, "-m", "program", "serve", "--model", "openai/fake", "--api-base",
                          "http://127.0.0.1:9/v1", "--web", "none", "--kb", "/nonexistent"], cwd=ROOT,
                         env=program_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 2, run.stderr
    assert run.stderr.strip().splitlines()[-1] == "error: --kb /nonexistent: no such file or folder"
