"""The deterministic fake LM served over HTTP like an OpenAI-compatible server (vLLM, Ollama...).

``start(delay=0.05)`` serves ``POST /v1/chat/completions`` on a loopback port; every answer
comes from ``tests.fake_lm.FakeLM``'s rules (``tests.conftest.default_rules`` unless given),
after ``delay`` seconds (a fixed per-call latency standing in for the model). Requests are
answered in parallel. ``fail=True`` answers every call with HTTP 500 instead.

``fault`` plays a failing or misbehaving model server for the first ``fault_calls`` requests
(every request when None), then answers normally:

* ``"500"``: HTTP 500; ``"429"``: HTTP 429 with ``Retry-After: retry_after`` seconds;
* ``"timeout"``: answers only after ``hang`` seconds (past the client's timeout);
* ``"empty"``: an empty completion; ``"truncated"``: the completion cut in half;
* ``"bad-body"``: HTTP 200 whose JSON body is cut off;
* ``"out-of-range"``: every true/false output field answered ``maybe``;
* ``"garbage"``: a completion of noise without any field marker.

A request with ``"stream": true`` is answered as OpenAI streams: server-sent
``chat.completion.chunk`` events, a piece of the text each (a word and the space after it), the
usage last when ``stream_options.include_usage`` asks, then ``[DONE]``; ``server.streamed``
counts them. ``logprobs=True`` gives each piece a log probability (-0.1) when a request asks
for them, streamed or not.

``server.requests`` counts every request, ``server.calls`` the ones answered normally.
``server.prompts`` keeps each answered request's messages. Like vLLM's and SGLang's prefix
caches, the usage says how much of a prompt an earlier one already held
(``prompt_tokens_details.cached_tokens``: the words of the longest prefix, in messages, that it
shares with an earlier prompt and its reply).

Run alone for the service benchmark or by hand:
``python -m tests.served_fake_lm --port 8001 --delay 0.05`` then
``python -m program serve --model openai/fake --api-base http://127.0.0.1:8001/v1``.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def _text(content) -> str:
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return content or ""


class FakeLMServer(ThreadingHTTPServer):
    """The server; ``base`` is ``http://127.0.0.1:PORT/v1``; ``calls`` counts answered calls."""

    daemon_threads = True

    def __init__(self, rules: dict | None = None, delay: float = 0.0, port: int = 0, fail: bool = False,
                 fault: str | None = None, fault_calls: int | None = None, retry_after: float = 1.0, hang: float = 5.0,
                 logprobs: bool = False):
        from tests.conftest import default_rules
        from tests.fake_lm import FakeLM

        super().__init__(("127.0.0.1", port), _Handler)
        self.fake = FakeLM(rules or default_rules())
        self.delay, self.fail = delay, fail
        self.fault, self.fault_calls, self.retry_after, self.hang = fault, fault_calls, retry_after, hang
        self.calls = 0
        self.requests = 0
        self.streamed = 0
        self.logprobs = logprobs
        self.prompts: list[list[dict]] = []
        self._lock = threading.Lock()
        self.base = f"http://127.0.0.1:{self.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def handle_error(self, request, client_address):
        pass  # a client that hung up is expected

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def _shared_words(prompt: list[dict], seen: list[dict]) -> int:
    """The words of the messages ``prompt`` begins with that ``seen`` begins with too, whole
    messages only (a prefix cache's hit, counted in words)."""
    shared = 0
    for a, b in zip(prompt, seen):
        if a != b:
            break
        shared += len(a["content"].split())
    return shared


class _Handler(BaseHTTPRequestHandler):
    server: FakeLMServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with server._lock:
            server.requests += 1
            fault = server.fault if server.fault_calls is None or server.requests <= server.fault_calls else None
        if server.fail or fault == "500":
            return self._send(500, {"error": {"message": "the fake model is down", "type": "server_error"}})
        if fault == "429":
            return self._send(429, {"error": {"message": "rate limited", "type": "rate_limit_error"}},
                              {"Retry-After": f"{server.retry_after:g}"})
        if fault == "timeout":
            time.sleep(server.hang)
        messages = body.get("messages", [])
        system = "".join(_text(m.get("content")) for m in messages if m.get("role") == "system")
        users = [_text(m.get("content")) for m in messages if m.get("role") == "user"]
        time.sleep(server.delay)
        text, n_in, n_out = server.fake.reply(system, users[-1] if users else "", users[:-1])
        text = _misbehave(fault, text)
        turns = [{"role": m.get("role"), "content": _text(m.get("content"))} for m in messages]
        with server._lock:
            server.calls += fault is None
            cached = max((_shared_words(turns, seen) for seen in server.prompts), default=0)
            server.prompts.append(turns + [{"role": "assistant", "content": text}])
        usage = {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out,
                 "prompt_tokens_details": {"cached_tokens": min(cached, n_in)}}
        pieces = re.findall(r"\S+\s*|\s+", text)
        logprobs = ({"content": [{"token": p, "logprob": -0.1, "bytes": list(p.encode()), "top_logprobs": []}
                                 for p in pieces]} if server.logprobs and body.get("logprobs") else None)
        if body.get("stream"):
            return self._stream(body, pieces, logprobs, usage)
        payload = {"id": f"cmpl-{server.requests}", "object": "chat.completion", "created": 0,
                   "model": body.get("model", "fake"),
                   "choices": [{"index": 0, "finish_reason": "stop", "logprobs": logprobs,
                                "message": {"role": "assistant", "content": text}}],
                   "usage": usage}
        self._send(200, payload, cut=fault == "bad-body")

    def _stream(self, body: dict, pieces: list[str], logprobs: dict | None, usage: dict) -> None:
        """The answer as server-sent ``chat.completion.chunk`` events, then ``[DONE]``."""
        with self.server._lock:
            self.server.streamed += 1
        head = {"id": f"cmpl-{self.server.requests}", "object": "chat.completion.chunk", "created": 0,
                "model": body.get("model", "fake")}
        chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "finish_reason": None}]}]
        for n, piece in enumerate(pieces):
            chunks.append({**head, "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None,
                                                "logprobs": {"content": [logprobs["content"][n]]} if logprobs
                                                else None}]})
        chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        if (body.get("stream_options") or {}).get("include_usage"):
            chunks.append({**head, "choices": [], "usage": usage})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        try:
            for chunk in chunks:
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send(self, status: int, payload: dict, headers: dict | None = None, cut: bool = False) -> None:
        data = json.dumps(payload).encode()
        if cut:
            data = data[: len(data) // 2]
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


def _misbehave(fault: str | None, text: str) -> str:
    """The completion ``text`` as a misbehaving model would send it (see the module docstring)."""
    if fault == "empty":
        return ""
    if fault == "truncated":
        return text[: len(text) // 2]
    if fault == "out-of-range":
        return re.sub(r"(\]\]\n)(True|False)\b", r"\1maybe", text)
    if fault == "garbage":
        return "lorem ipsum }{ %% ### 42 <|endoftext|> ¯\\_(ツ)_/¯"
    return text


def start(rules: dict | None = None, delay: float = 0.0, port: int = 0, fail: bool = False, **faults) -> FakeLMServer:
    """Start the server in a daemon thread and return it (``server.base``, ``server.stop()``);
    ``faults``: ``fault``, ``fault_calls``, ``retry_after``, ``hang`` (see the module docstring)."""
    server = FakeLMServer(rules, delay, port, fail, **faults)
    server.thread.start()
    return server


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds per call")
    args = parser.parse_args()
    server = start(delay=args.delay, port=args.port)
    print(f"fake LM on {server.base} ({args.delay:g} s per call)", flush=True)
    try:
        server.thread.join()
    except KeyboardInterrupt:
        server.stop()
