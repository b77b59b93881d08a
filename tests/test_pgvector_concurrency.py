"""Two processes answer from one pgvector knowledge base while a third re-indexes a changed
document: no error, and every answer cites a chunk of one whole edition, never a mix."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from program.retrieval.chunking import chunk_document
from program.retrieval.corpus import Document
from program.retrieval.postgres import PgVectorKnowledgeBase
from tests.pg_worker import acme

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

ROOT = Path(__file__).resolve().parent.parent
RUNS = 5  # editions 2, 3, 2, 3, 2 after the first (1)


def chunk_texts(edition: int) -> dict[str, str]:
    doc = Document("acme.md", acme(edition), "Acme Rockets", "")
    return {c.chunk_id: c.text for c in chunk_document(doc)}


def edition_of(chunk_id: str, text: str, editions: dict[int, dict[str, str]]) -> int:
    found = [e for e, chunks in editions.items() if chunks.get(chunk_id) == text]
    assert found, f"{chunk_id} holds text of no edition: {text!r}"
    return found[0]


def _wait_for_lines(path: Path, procs, timeout: float = 180) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if path.exists() and path.read_text().strip():
            return
        for p in procs:
            assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    raise AssertionError(f"no answer in {path} after {timeout} s")


def test_answers_cite_whole_editions_while_a_document_is_reindexed(tmp_path, pg_url):
    corpus = tmp_path / "docs"
    corpus.mkdir()
    (corpus / "acme.md").write_text(acme(1), encoding="utf-8")
    (corpus / "danube.md").write_text("# Danube\n\nThe Danube flows through ten countries.\n", encoding="utf-8")
    PgVectorKnowledgeBase.build(corpus, pg_url).close()
    editions = {e: chunk_texts(e) for e in (1, 2, 3)}
    assert len(editions[1]) == 3 and all(t != editions[2][i] for i, t in editions[1].items())

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CRAG_EMBED_THREADS": "1", "PYTHONPATH": str(ROOT)}
    stop = tmp_path / "stop"
    outs = [tmp_path / f"answers-{i}.jsonl" for i in range(2)]
    answerers = [subprocess.Popen([sys.executable, "-m", "tests.pg_worker", "answer", pg_url, str(o), str(stop)],
                                  cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for o in outs]
    try:
        for o in outs:  # both answer edition 1 before the re-indexing starts
            _wait_for_lines(o, answerers)
        indexer = subprocess.run([sys.executable, "-m", "tests.pg_worker", "reindex", pg_url, str(corpus), str(RUNS)],
                                 cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert indexer.returncode == 0, indexer.stderr
    finally:
        stop.touch()
        results = [p.communicate(timeout=300) for p in answerers]
    for p, (_, err) in zip(answerers, results):
        assert p.returncode == 0, err
        assert "Traceback" not in err

    runs = [json.loads(line) for line in indexer.stdout.splitlines()]
    assert [r["edition"] for r in runs] == [2, 3, 2, 3, 2]
    assert all(r["published"] == ["acme.md"] and r["embedded"] == 3 for r in runs)

    answers = [json.loads(line) for o in outs for line in o.read_text().splitlines()]
    during = [a for a in answers if a["t1"] > runs[0]["t0"] and a["t0"] < runs[-1]["t1"]]
    assert during, "no answer overlapped the re-indexing"
    seen = set()
    for a in answers:
        assert a["answer"].startswith("Acme Rockets was founded by Jane Roe [")
        cited = {edition_of(i, t, editions) if i.startswith("acme.md") else 0 for i, t in a["hits"]}
        cited.discard(0)
        assert len(cited) == 1, f"one search mixed editions {cited}: {a['hits']}"  # never a half-written document
        for source_id, strip in a["citations"]:
            assert source_id.startswith("acme.md#")
            assert any(strip in chunks.get(source_id, "") for chunks in editions.values()), strip
        seen |= cited
    assert {1, 2} <= seen  # answers before and after the re-indexing
