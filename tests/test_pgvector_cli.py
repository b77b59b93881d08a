"""``--kb postgresql://...`` (or ``CRAG_KB``) in ``index``, ``ask`` and ``optimize.evaluate``, on a real server."""

from __future__ import annotations

import json

import pytest

from program.app.cli import main
from program.retrieval.postgres import PgVectorKnowledgeBase
from program.retrieval.postgres.url import DatabaseURL
from tests.conftest import FOUNDING


@pytest.fixture
def corpus(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    (root / "acme.md").write_text(f"# Acme Rockets\n\n{FOUNDING} It builds sounding rockets for universities.\n")
    (root / "danube.md").write_text("# Danube\n\nThe Danube flows through ten countries.\n")
    return root


@pytest.fixture
def uncompiled(tmp_path, fake_lm, monkeypatch):
    """A compiled-program folder holding the uncompiled signatures, and the fake LM in place of a model."""
    from program.app.compiled import save_compiled
    from program.stages.crag import CRAG

    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: fake_lm)
    save_compiled(CRAG(None), {"lm": "fake"}, tmp_path / "compiled")
    return tmp_path / "compiled"


def test_index_then_ask_from_postgres(corpus, pg_url, uncompiled, capsys, monkeypatch):
    shown = DatabaseURL.parse(pg_url).display
    assert main(["index", str(corpus), "--kb", pg_url, "--no-adapt"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (f"indexed 2 chunks from {corpus} into {shown}: 2 file(s) "
                                                       f"updated, 0 unchanged, 0 removed, 2 chunks embedded")
    monkeypatch.setenv("CRAG_KB", pg_url)
    assert main(["index", str(corpus), "--no-adapt"]) == 0
    assert "0 file(s) updated, 2 unchanged, 0 removed, 0 chunks embedded" in capsys.readouterr().out
    assert main(["ask", "Who founded Acme Rockets?", "--compiled", str(uncompiled), "--web", "none", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answer"] == "Acme Rockets was founded by Jane Roe [1]."
    assert [c["source_id"] for c in result["citations"]] == ["acme.md#0"]
    monkeypatch.delenv("CRAG_KB")
    assert main(["ask", "Who founded Acme Rockets?", "--kb", pg_url, "--compiled", str(uncompiled),
                 "--web", "none"]) == 0
    assert "[1] acme.md#0 " in capsys.readouterr().out


def test_errors_are_one_line(corpus, pg_server, pg_url, uncompiled, capsys, monkeypatch):
    missing = pg_url.rsplit("=", 1)[0] + "=missing_kb"
    assert main(["ask", "Who founded Acme Rockets?", "--kb", missing, "--compiled", str(uncompiled)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no knowledge base at ") and err.count("\n") == 1 and "Traceback" not in err

    class OtherModel:  # the table is built with another embedding model than the CLI's
        name, dimensions = "some/other-model", 384

        def encode(self, texts):
            from program.retrieval import get_embedder
            return get_embedder().encode(texts)

    PgVectorKnowledgeBase.build(corpus, pg_url, OtherModel()).close()
    for argv in (["ask", "Who founded Acme Rockets?", "--kb", pg_url], ["index", str(corpus), "--kb", pg_url]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (f"error: knowledge base at {DatabaseURL.parse(pg_url).display} was built with "
                       f"'some/other-model' (384d), not 'sentence-transformers/all-MiniLM-L6-v2' (384d); "
                       f"use that model or index into another table\n")
    assert main(["index", str(corpus), "--kb", str(corpus)]) == 2
    assert "--kb for index takes a postgresql:// URL" in capsys.readouterr().err


def test_evaluate_answers_from_the_kb_flag(corpus, pg_url, fake_lm, tmp_path, monkeypatch, capsys):
    from optimize import evaluate

    PgVectorKnowledgeBase.build(corpus, pg_url).close()
    rows = [{"id": "q1", "question": "Who founded Acme Rockets?", "relation": "founder", "gold": ["Jane Roe"],
             "expected_action": None, "answerable": True, "needs_retrieval": True}]
    monkeypatch.setattr(evaluate, "load_set", lambda *a: rows)
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda model=None, *a, **k: fake_lm)
    seen = []

    def build_program(mode, *, knowledge_base=None, **kw):
        from program.stages.baselines import VanillaRAG

        seen.append(knowledge_base)
        return VanillaRAG(knowledge_base, k=1)

    monkeypatch.setattr("program.app.factory.build_program", build_program)
    out = tmp_path / "run"
    assert evaluate.main(["--modes", "rag", "--compiled", "none", "--groundedness", "off", "--kb", pg_url,
                          "--out", str(out)]) == 0
    assert isinstance(seen[0], PgVectorKnowledgeBase) and str(seen[0].url) == DatabaseURL.parse(pg_url).display
    summary = json.loads((out / "summary.json").read_text())
    assert summary["modes"]["rag"]["accuracy"] == 100.0  # per cent
    assert evaluate.main(["--modes", "rag", "--kb", pg_url + "_missing", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines()[-1].startswith("error: no knowledge base at ")


def test_a_pgvector_knowledge_base_lists_its_chunks_for_adaptation(corpus, pg_url, embedder):
    """``chunks`` reads every live chunk, as the faiss knowledge base holds them (``program.adaptation.adapt``
    reads it)."""
    from program.retrieval import KnowledgeBase
    from program.retrieval.postgres import PgVectorKnowledgeBase

    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as pg:
        faiss_kb = KnowledgeBase.build(corpus, corpus.parent / "index", embedder)
        assert pg.chunks == faiss_kb.chunks
        assert [(c.chunk_id, c.heading) for c in pg.chunks] == [("acme.md#0", "Acme Rockets"),
                                                                ("danube.md#0", "Danube")]
