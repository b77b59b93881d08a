"""The served embedder (program/retrieval/served_embedder.py) against a loopback fake
embeddings server (tests/served_fake_embedder.py): order, retries, timeouts, answers that
would break an index, identity in the knowledge base, the flag and the variable."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from program.app.flags import SetupError, check_embedder
from program.retrieval import Embedder, EmbeddingError, KnowledgeBase, KnowledgeBaseError, get_embedder
from program.retrieval import embedder_choice
from program.retrieval.embedder_spec import parse_spec
from program.retrieval.served_embedder import ServedEmbedder
from tests.served_fake_embedder import start, vector
from tests.service_process import ROOT, free_port, program_env, write_docs

MODEL = "fake-embed"


@pytest.fixture
def server():
    servers = []

    def make(**options):
        servers.append(start(**options))
        return servers[-1]

    yield make
    for s in servers:
        s.stop()


@pytest.fixture(autouse=True)
def no_configured_embedder(monkeypatch):
    """Every test starts and ends with the knowledge bases' embedder unconfigured."""
    for name in ("CRAG_EMBEDDER", "CRAG_EMBEDDER_API_KEY", "CRAG_EMBEDDER_BATCH", "CRAG_EMBEDDER_CONCURRENCY",
                 "CRAG_EMBEDDER_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(embedder_choice, "_from_env", {})
    embedder_choice.configure_embedder(None)
    yield
    embedder_choice.configure_embedder(None)


def served(srv, **options) -> ServedEmbedder:
    return ServedEmbedder(srv.base, MODEL, **{"backoff": 0.01, **options})


def expected(texts: list[str], dims: int = 32) -> np.ndarray:
    vecs = np.array([vector(t, dims) for t in texts])
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def test_order_is_kept_across_concurrent_batches_and_rows_are_unit_vectors(server):
    srv = server(delay=0.05, shuffle=True)
    texts = [f"text number {i} about topic {i % 5}" for i in range(37)]
    emb = served(srv, batch_size=4, concurrency=4)

    vecs = emb.encode(texts)

    assert vecs.shape == (37, 32) and vecs.dtype == np.float32
    np.testing.assert_allclose(vecs, expected(texts), atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert max(srv.batches) <= 4 and sum(srv.batches[1:]) == 37  # the probe, then the 10 batches
    assert 1 < srv.in_flight_max <= 4


def test_the_bound_on_requests_in_flight_holds_across_threads(server):
    from concurrent.futures import ThreadPoolExecutor

    srv = server(delay=0.05)
    emb = served(srv, batch_size=2, concurrency=3, dimensions=32)
    with ThreadPoolExecutor(6) as pool:  # six questions at once, each one batch (the caller's thread)
        results = list(pool.map(lambda i: emb.encode([f"question {i}", f"other {i}"]), range(6)))

    assert all(r.shape == (2, 32) for r in results)
    assert srv.in_flight_max == 3


def test_dimensions_come_from_one_probe_and_an_empty_list_needs_no_more(server):
    srv = server(dims=24)
    emb = served(srv)

    assert emb.dimensions == 24 and emb.dimensions == 24
    assert emb.encode([]).shape == (0, 24)
    assert srv.requests == 1


@pytest.mark.parametrize("fault", ["500", "429"])
def test_a_failing_server_is_retried_until_it_answers(server, fault):
    srv = server(fault=fault, fault_calls=2)
    vecs = served(srv, dimensions=32).encode(["acme rockets", "danube"])

    np.testing.assert_allclose(vecs, expected(["acme rockets", "danube"]), atol=1e-5)
    assert srv.requests == 3


def test_a_server_that_stays_down_is_one_error_naming_it_after_the_retries(server):
    srv = server(fault="500")
    with pytest.raises(EmbeddingError) as err:
        served(srv, dimensions=32, attempts=3).encode(["acme"])

    message = str(err.value)
    assert "\n" not in message and f"{srv.base}/embeddings" in message and MODEL in message
    assert "HTTP 500: the fake embedder is down (3 attempts)" in message
    assert srv.requests == 3


def test_a_server_that_never_answers_times_out_after_the_retries(server):
    srv = server(fault="timeout", hang=3.0)
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match=r"no answer within 0.2 s \(2 attempts\)") as err:
        served(srv, dimensions=32, timeout=0.2, attempts=2).encode(["acme"])

    assert time.monotonic() - started < 2.0
    assert f"{srv.base}/embeddings" in str(err.value)


def test_nothing_listening_is_a_connection_error_after_the_retries():
    emb = ServedEmbedder(f"http://127.0.0.1:{free_port()}/v1", MODEL, attempts=2, backoff=0.01)
    with pytest.raises(EmbeddingError, match=r"cannot connect: .*\(2 attempts\)"):
        emb.load()


def test_a_refused_request_is_not_retried_and_says_what_the_server_said(server):
    srv = server(fault="400")
    with pytest.raises(EmbeddingError, match="HTTP 400: input is too long for the fake model"):
        served(srv, dimensions=32).encode(["acme"])
    assert srv.requests == 1


@pytest.mark.parametrize("fault, problem", [
    ("wrong-dims", "answered 33-dimensional vectors, expected 32"),
    ("wrong-count", "answered 2 embeddings for 3 texts"),
    ("not-numbers", "answered an embedding that is not a list of numbers"),
])
def test_an_answer_that_would_break_the_index_is_an_error_naming_the_problem(server, fault, problem):
    srv = server(fault=fault)
    with pytest.raises(EmbeddingError) as err:
        served(srv, dimensions=32).encode(["a", "b", "c"])
    assert problem in str(err.value) and f"{srv.base}/embeddings" in str(err.value)
    assert srv.requests == 1  # a misconfigured server is not asked again


def test_vectors_of_another_size_than_the_probes_are_refused(server):
    srv = server(fault="wrong-dims", fault_calls=None)
    emb = served(srv)
    assert emb.dimensions == 33  # the probe learned the (wrong) size: every later answer must keep it
    srv.fault = None
    with pytest.raises(EmbeddingError, match="answered 32-dimensional vectors, expected 33"):
        emb.encode(["acme"])


def test_the_key_is_sent_as_a_bearer_token_and_never_shown(server, monkeypatch):
    srv = server(fault="500")
    monkeypatch.setenv("CRAG_EMBEDDER_API_KEY", "sk-secret-embedding-key")
    emb = ServedEmbedder.from_spec(f"{srv.base}#{MODEL}", backoff=0.01, attempts=1, dimensions=32)
    with pytest.raises(EmbeddingError) as err:
        emb.encode(["acme"])
    assert srv.auth == "Bearer sk-secret-embedding-key"
    assert "sk-secret" not in str(err.value) and "sk-secret" not in repr(emb)


def test_a_knowledge_base_built_with_a_served_embedder_finds_the_right_chunk_and_refuses_minilm(server, tmp_path):
    srv = server()
    docs, index_dir = write_docs(tmp_path / "docs"), tmp_path / "index"
    emb = served(srv)

    kb = KnowledgeBase.build(docs, index_dir, embedder=emb, progress=False)
    top = kb.search("Who founded Acme Rockets?", k=1, mode="dense")[0]

    assert top.title == "Acme Rockets"
    assert kb.manifest["embedding"] == {"model": f"served:{MODEL}", "dimensions": 32}
    reopened = KnowledgeBase.load(index_dir, embedder=served(srv))  # another client, same model: the same embedder
    assert reopened.search("Danube countries", k=1, mode="dense")[0].title == "Danube"
    with pytest.raises(KnowledgeBaseError, match=rf"built with 'served:{MODEL}' \(32d\), not "
                                                 r"'sentence-transformers/all-MiniLM-L6-v2'"):
        KnowledgeBase.load(index_dir, embedder=Embedder())  # its name and size are read without loading it


def test_the_identity_is_the_model_name_not_the_address(server):
    one, other = server(), server()
    moved = served(other)
    assert served(one).name == moved.name == f"served:{MODEL}"
    recorded = {"model": f"served:{MODEL}", "dimensions": 32}
    assert embedder_choice.embedding_mismatch(recorded, moved) is None
    assert embedder_choice.embedding_mismatch(recorded, ServedEmbedder(one.base, "bge-small", dimensions=32)) == (
        f"built with 'served:{MODEL}' (32d), not 'served:bge-small'")
    assert embedder_choice.embedding_mismatch({**recorded, "dimensions": 16}, moved) == (
        f"built with 'served:{MODEL}' (16d), not 'served:{MODEL}' (32d)")


@pytest.mark.parametrize("spec, base, model", [
    ("http://127.0.0.1:8080/v1#BAAI/bge-small-en-v1.5", "http://127.0.0.1:8080/v1", "BAAI/bge-small-en-v1.5"),
    ("http://localhost:11434/v1/#nomic-embed-text:latest", "http://localhost:11434/v1", "nomic-embed-text:latest"),
    ("https://api.openai.com/v1/embeddings#text-embedding-3-small", "https://api.openai.com/v1",
     "text-embedding-3-small"),
])
def test_a_spec_is_a_base_url_and_a_model(spec, base, model):
    parsed = parse_spec(spec)
    assert (parsed.base_url, parsed.model) == (base, model)


@pytest.mark.parametrize("spec", ["bge-small", "ftp://host/v1#m", "http://host/v1", "http://host/v1#",
                                  "http://#m", "http://host/v1#my model", "http://host/v1?x=1#m"])
def test_a_malformed_spec_is_refused(spec):
    with pytest.raises(ValueError, match="must be BASE_URL#MODEL"):
        parse_spec(spec)


def test_local_or_nothing_is_the_in_process_minilm():
    assert parse_spec("local") is None and parse_spec(None) is None and parse_spec("") is None


@pytest.mark.parametrize("flag, env, message", [
    ("bge-small", {}, "--embedder must be BASE_URL#MODEL"),
    ("", {}, "--embedder is empty"),
    (None, {"CRAG_EMBEDDER": "http://host/v1"}, "CRAG_EMBEDDER must be BASE_URL#MODEL"),
    ("http://host/v1#m", {"CRAG_EMBEDDER_CONCURRENCY": "0"}, "CRAG_EMBEDDER_CONCURRENCY must be a whole number from 1"),
    (None, {"CRAG_EMBEDDER": "http://host/v1#m", "CRAG_EMBEDDER_BATCH": "many"}, "CRAG_EMBEDDER_BATCH must be"),
    ("http://host/v1#m", {"CRAG_EMBEDDER_TIMEOUT": "nan"}, "CRAG_EMBEDDER_TIMEOUT must be"),
])
def test_the_flag_and_the_variables_are_checked_in_one_line(flag, env, message, monkeypatch):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SetupError, match=message) as err:
        check_embedder(flag)
    assert "\n" not in str(err.value)


def test_good_settings_pass_without_contacting_anything(monkeypatch):
    monkeypatch.setenv("CRAG_EMBEDDER_CONCURRENCY", "8")
    check_embedder(f"http://127.0.0.1:{free_port()}/v1#m")
    check_embedder("local")
    check_embedder(None)


def test_index_refuses_a_bad_embedder_in_one_line_before_indexing(tmp_path, capsys):
    from program.app.cli import main

    docs = write_docs(tmp_path / "docs")
    assert main(["index", str(docs), "--no-adapt", "--out", str(tmp_path / "i"), "--embedder", "bge-small"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --embedder must be BASE_URL#MODEL") and "\n" not in err
    assert not (tmp_path / "i").exists()


@pytest.mark.slow  # the whole of ask (DSPy, the program) on the fake LM
def test_ask_answers_from_a_knowledge_base_the_server_embedded(server, tmp_path, capsys, monkeypatch, fake_lm):
    from program.app.cli import main
    from program.app.resources import index_dir_for

    srv = server()
    docs = write_docs(tmp_path / "docs")
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: fake_lm)
    monkeypatch.setattr("program.app.resources.embedder", lambda: None)  # the judges' MiniLM is not this test's
    assert main(["ask", "Who founded Acme Rockets?", "--kb", str(docs), "--embedder", f"{srv.base}#{MODEL}",
                 "--compiled", "none", "--web", "none"]) == 0
    assert "Jane Roe" in capsys.readouterr().out
    manifest = json.loads((index_dir_for(docs) / "manifest.json").read_text())
    assert manifest["embedding"] == {"model": f"served:{MODEL}", "dimensions": 32}
    # the same folder asked with the in-process model: refused in one line, the index not rebuilt
    assert main(["ask", "Who founded Acme Rockets?", "--kb", str(docs), "--compiled", "none", "--web", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith(f"error: the index of {docs} at {index_dir_for(docs)} was built with 'served:{MODEL}' "
                          "(32d), not 'sentence-transformers/all-MiniLM-L6-v2'; ask with the embedder that built it")
    assert json.loads((index_dir_for(docs) / "manifest.json").read_text()) == manifest


def test_ask_says_in_one_line_that_the_embedding_server_refused(server, tmp_path, capsys, monkeypatch):
    from program.app.cli import main

    srv = server(fault="400")
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["ask", "Who founded Acme Rockets?", "--kb", str(write_docs(tmp_path / "docs")), "--embedder",
                 f"{srv.base}#{MODEL}", "--compiled", "none", "--web", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"error: embedding server {srv.base}/embeddings (model '{MODEL}'): "
                   "HTTP 400: input is too long for the fake model")


def test_the_knowledge_bases_embedder_follows_the_flag_then_the_variable_and_the_judges_keep_minilm(monkeypatch):
    monkeypatch.setenv("CRAG_EMBEDDER", "http://127.0.0.1:9/v1#from-env")
    from_env = embedder_choice.knowledge_base_embedder()
    assert from_env.name == "served:from-env" and embedder_choice.knowledge_base_embedder() is from_env  # built once

    embedder_choice.configure_embedder("http://127.0.0.1:9/v1#from-flag")
    assert embedder_choice.knowledge_base_embedder().name == "served:from-flag"
    embedder_choice.configure_embedder("local")
    assert embedder_choice.knowledge_base_embedder() is get_embedder()
    embedder_choice.configure_embedder(None)
    assert embedder_choice.knowledge_base_embedder() is from_env
    assert isinstance(get_embedder(), Embedder)  # the judges' features stay all-MiniLM-L6-v2's
    monkeypatch.setenv("CRAG_EMBEDDER", "bge-small")
    with pytest.raises(ValueError, match="^CRAG_EMBEDDER must be BASE_URL#MODEL"):
        embedder_choice.knowledge_base_embedder()


@pytest.mark.slow
def test_index_embeds_through_the_server_then_reuses_the_index(server, tmp_path):
    srv = server(delay=0.01)
    docs, out = write_docs(tmp_path / "docs"), tmp_path / "index"
    command = [sys.executable, "-m", "program", "index", str(docs), "--no-adapt", "--out", str(out),
               "--embedder", f"{srv.base}#{MODEL}"]
    env = program_env(tmp_path / "cache", CRAG_EMBEDDER_BATCH="2")

    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert f"indexed 2 chunks from {docs}" in first.stdout
    assert json.loads((out / "manifest.json").read_text())["embedding"] == {"model": f"served:{MODEL}",
                                                                            "dimensions": 32}
    assert srv.texts > 2 and max(srv.batches) <= 2  # the chunks and the vocabulary's terms, 2 a request

    asked = srv.requests
    again = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert srv.requests == asked + 1  # reused: only the dimension probe reached the server


def test_a_benchmark_level_embeds_every_chunk_and_reports_its_rate(server):
    from experiments.bench_served_embedder import _chunks, run_level

    srv = server(dims=8)
    row = run_level(srv.base, 2, _chunks(10), 4)
    assert row["concurrency"] == 2 and row["rate"] > 0
    assert sorted(srv.batches[1:]) == [2, 4, 4]  # after the probe: 10 chunks, 4 a request


@pytest.mark.slow  # a PostgreSQL server
def test_a_pgvector_table_indexed_through_the_server_refuses_minilm_in_one_line(server, pg_url, tmp_path, capsys):
    from program.app.cli import main
    from program.retrieval.postgres.url import DatabaseURL

    srv = server()
    docs = write_docs(tmp_path / "docs")
    assert main(["index", str(docs), "--kb", pg_url, "--no-adapt", "--embedder", f"{srv.base}#{MODEL}"]) == 0
    assert "indexed 2 chunks" in capsys.readouterr().out
    assert main(["index", str(docs), "--kb", pg_url, "--no-adapt"]) == 2
    assert capsys.readouterr().err == (
        f"error: knowledge base at {DatabaseURL.parse(pg_url).display} was built with 'served:{MODEL}' (32d), "
        "not 'sentence-transformers/all-MiniLM-L6-v2' (384d); use that model or index into another table\n")
