"""A deterministic fake embeddings server speaking OpenAI's API, like TEI, vLLM or Ollama.

``start(dims=32, delay=0.0)`` serves ``POST /v1/embeddings`` (``{"model", "input": [texts]}``)
on a loopback port, answering ``{"data": [{"index": i, "embedding": [...]}], "model": ...}``
after ``delay`` seconds per request (a fixed per-batch latency standing in for the model), in
parallel. Each vector comes from the text's words: every lower-cased word adds a fixed
pseudo-random vector (from its sha256), so texts sharing words are near, unnormalised (as many
servers answer); ``vector(text, dims)`` gives the same vector here. ``shuffle=True`` lists the
answers out of order (their ``index`` says where they belong).

``fault`` misbehaves for the first ``fault_calls`` requests (every request when None), then
answers normally:

* ``"500"``: HTTP 500; ``"429"``: HTTP 429 with ``Retry-After: 0``;
* ``"timeout"``: answers only after ``hang`` seconds (past the client's timeout);
* ``"wrong-dims"``: vectors of ``dims + 1`` numbers; ``"wrong-count"``: one vector too few;
* ``"not-numbers"``: every vector a list of strings;
* ``"400"``: HTTP 400 with an OpenAI-style error message (not retried).

``server.requests`` counts requests, ``server.texts`` the texts answered normally,
``server.batches`` each answered request's batch size, ``server.in_flight_max`` the most
requests handled at once, ``server.auth`` the last ``Authorization`` header.

Run alone for the benchmark or by hand: ``python -m tests.served_fake_embedder --port 8090
--delay 0.1`` then ``python -m program index FOLDER --embedder http://127.0.0.1:8090/v1#fake``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


@functools.lru_cache(maxsize=100_000)  # the benchmark's server must not spend its time here
def _word_vector(word: str, dims: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dims)


def vector(text: str, dims: int) -> list[float]:
    """The fake model's vector of ``text``: the sum of its words' vectors, scaled by 3 (not unit
    length), to 6 decimals (a server's float32 numbers are as short: the JSON is as long)."""
    words = re.findall(r"\w+", text.lower()) or [""]
    return np.round(3.0 * sum(_word_vector(w, dims) for w in words), 6).tolist()


@functools.lru_cache(maxsize=200_000)  # a text asked again is answered without the work (the benchmark's warm-up)
def _vector_json(text: str, dims: int) -> str:
    return json.dumps(vector(text, dims))


class FakeEmbeddingServer(ThreadingHTTPServer):
    """The server; ``base`` is ``http://127.0.0.1:PORT/v1``."""

    daemon_threads = True

    def __init__(self, dims: int = 32, delay: float = 0.0, port: int = 0, fault: str | None = None,
                 fault_calls: int | None = None, hang: float = 5.0, shuffle: bool = False):
        super().__init__(("127.0.0.1", port), _Handler)
        self.dims, self.delay, self.shuffle = dims, delay, shuffle
        self.fault, self.fault_calls, self.hang = fault, fault_calls, hang
        self.requests = self.texts = self.in_flight = self.in_flight_max = 0
        self.batches: list[int] = []
        self.auth: str | None = None
        self._lock = threading.Lock()
        self.base = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def handle_error(self, request, client_address):
        pass  # a client that hung up (its timeout) is expected

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeEmbeddingServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with server._lock:
            server.requests += 1
            server.auth = self.headers.get("Authorization")
            fault = server.fault if server.fault_calls is None or server.requests <= server.fault_calls else None
            server.in_flight += 1
            server.in_flight_max = max(server.in_flight_max, server.in_flight)
        try:
            self._answer(body, fault)
        finally:
            with server._lock:
                server.in_flight -= 1

    def _answer(self, body: dict, fault: str | None) -> None:
        server = self.server
        if self.path.rstrip("/") != "/v1/embeddings":
            return self._send(404, {"error": {"message": f"no route {self.path}"}})
        if fault == "500":
            return self._send(500, {"error": {"message": "the fake embedder is down", "type": "server_error"}})
        if fault == "429":
            return self._send(429, {"error": {"message": "rate limited"}}, {"Retry-After": "0"})
        if fault == "400":
            return self._send(400, {"error": {"message": "input is too long for the fake model"}})
        if fault == "timeout":
            time.sleep(server.hang)
        texts = body.get("input")
        texts = [texts] if isinstance(texts, str) else list(texts or [])
        time.sleep(server.delay)
        dims = server.dims + (fault == "wrong-dims")
        rows = [(i, _vector_json(t, dims)) for i, t in enumerate(texts)]
        if fault == "wrong-count":
            rows = rows[:-1]
        if fault == "not-numbers":
            rows = [(i, json.dumps([str(x) for x in json.loads(v)])) for i, v in rows]
        if server.shuffle:
            rows = rows[::-1]
        with server._lock:
            server.texts += len(texts) if fault is None else 0
            server.batches.append(len(texts))
        data = ", ".join(f'{{"object": "embedding", "index": {i}, "embedding": {v}}}' for i, v in rows)
        self._send(200, f'{{"object": "list", "data": [{data}], "model": {json.dumps(body.get("model", "fake"))}, '
                        '"usage": {"prompt_tokens": 0, "total_tokens": 0}}')

    def _send(self, status: int, payload: dict | str, headers: dict | None = None) -> None:
        data = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (its timeout)


def start(dims: int = 32, delay: float = 0.0, port: int = 0, **faults) -> FakeEmbeddingServer:
    """Start the server in a daemon thread and return it (``server.base``, ``server.stop()``);
    ``faults``: ``fault``, ``fault_calls``, ``hang``, ``shuffle`` (see the module docstring)."""
    server = FakeEmbeddingServer(dims, delay, port, **faults)
    server.thread.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.served_fake_embedder", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument("--dims", type=int, default=32)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds per request (default 0)")
    args = parser.parse_args(argv)
    server = start(args.dims, args.delay, args.port)
    print(f"serving fake embeddings at {server.base}/embeddings ({args.dims} dimensions)", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
