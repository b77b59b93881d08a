"""The pgvector knowledge base against a real PostgreSQL server (pgserver): search, manifest,
incremental and interrupted ingestion, model checks, filters, lost connections."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from program.retrieval import KnowledgeBase, KnowledgeBaseError, KnowledgeBaseProtocol
from program.retrieval.postgres import KnowledgeBaseUnavailable, PgVectorKnowledgeBase
from program.retrieval.postgres.connection import Database
from program.retrieval.postgres.url import DatabaseURL
from tests.postgres import as_an_earlier_version, kb_url, start
from tests.test_retrieval import SpyEmbedder, write_corpus

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

DOCUMENTS = Path(__file__).parent / "data" / "documents"
QUERIES = ["Which tower stands in Paris?", "What do cats eat?", "When did Etna erupt?",
           "source plant of green tea", "river in Egypt", "capital of Italy"]


class FailingEmbedder(SpyEmbedder):
    """Embeds ``ok_calls`` batches, then raises on the next one (a crash mid-run)."""

    def __init__(self, inner, ok_calls: int):
        super().__init__(inner)
        self.ok_calls = ok_calls

    def encode(self, texts):
        if len(self.calls) >= self.ok_calls:
            raise RuntimeError("simulated crash while embedding")
        return super().encode(texts)


def ids(passages):
    return [p.id for p in passages]


def test_same_passages_manifest_and_terms_as_faiss(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    faiss_kb = KnowledgeBase.build(corpus, tmp_path / "idx", embedder=embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        assert isinstance(kb, KnowledgeBaseProtocol) and isinstance(faiss_kb, KnowledgeBaseProtocol)
        assert len(kb) == len(faiss_kb) == 8
        for q in QUERIES:
            ours, theirs = kb.search(q, k=3), faiss_kb.search(q, k=3)
            assert [(p.id, p.text, p.source, p.title, p.url) for p in ours] == \
                   [(p.id, p.text, p.source, p.title, p.url) for p in theirs]
            assert [p.score for p in ours] == pytest.approx([p.score for p in theirs], abs=1e-5)
        assert kb.search("Which tower stands in Paris?", k=1)[0].id == "kb-1#0"
        assert kb.search("   ") == [] and kb.search("Paris", k=0) == [] and len(kb.search("Paris", k=50)) == 8
        assert kb.candidate_terms("What do cats eat?") == faiss_kb.candidate_terms("What do cats eat?")
        # which names the documents write at all, in either number, as the same words both ways
        asked = {"etna", "colosseums", "cat", "wrought", "velero", "iron-age", "sicil"}
        assert kb.mentions(asked) == faiss_kb.mentions(asked) == {"etna", "colosseums", "cat", "wrought"}
        assert kb.mentions(set()) == set() == faiss_kb.mentions(["velero"])

        m = kb.manifest
        for key in ("files", "embedding", "chunking", "documents", "chunk_count"):
            assert m[key] == faiss_kb.manifest[key], key
        assert m["index"] == {"type": "hnsw", "metric": "cosine", "opclass": "vector_cosine_ops",
                              "m": 16, "ef_construction": 64, "ef_search": 100}
        assert m["backend"] == "pgvector" and m["generation"] == 4  # one per published file
        table = DatabaseURL.parse(pg_url).table
        with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
            indexdef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                    [f"{table}_embedding_hnsw"]).fetchone()[0]
        assert "USING hnsw (embedding vector_cosine_ops) WITH (m='16', ef_construction='64')" in indexdef


def test_connect_by_url_and_filters(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    with KnowledgeBase.connect(pg_url, embedder) as kb:
        assert isinstance(kb, PgVectorKnowledgeBase)
        assert ids(kb.search("Which tower stands in Paris?", k=3, source="sub/tea.txt")) == ["sub/tea.txt#0"]
        assert ids(kb.search("Which tower stands in Paris?", k=3, document="kb-2")) == ["kb-2#0"]
        assert sorted(ids(kb.search("cats", k=5, document=["cats.md", "volcano.html"]))) == \
               ["cats.md#0", "cats.md#1", "volcano.html#0", "volcano.html#1"]
        assert ids(kb.search("cats", k=5, source="kb.jsonl", document="cats.md")) == []
        assert ids(kb.search("What do cats eat?", k=1, source=["cats.md", "kb.jsonl"])) == ["cats.md#1"]


def test_reindex_embeds_only_what_changed(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    spy = SpyEmbedder(embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, spy) as kb:
        r = kb.last_ingest
        assert spy.calls == [] and (r.unchanged, r.embedded, r.published, r.chunks) == (4, 0, [], 8)
    (corpus / "sub" / "tea.txt").write_text("Black tea is oxidised more than green tea.\n\nOolong sits between.")
    (corpus / "cats.md").unlink()
    spy = SpyEmbedder(embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, spy) as kb:
        r = kb.last_ingest
        assert spy.calls[0] == 1  # the tea chunk; then the vocabulary's terms
        assert (r.published, r.removed, r.embedded, r.chunks) == (["sub/tea.txt"], ["cats.md"], 1, 6)
        assert "Oolong" in kb.search("oolong tea", k=1)[0].text
        assert "cats.md" not in kb.manifest["files"] and len(kb) == 6
        assert "cats.md#1" not in ids(kb.search("What do cats eat?", k=6))
    # one document of a JSONL file changes: its file is republished, the unchanged chunks keep their vectors
    rows = (corpus / "kb.jsonl").read_text().replace("wrought-iron", "lattice")
    (corpus / "kb.jsonl").write_text(rows)
    spy = SpyEmbedder(embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, spy) as kb:
        assert spy.calls[0] == 1 and kb.last_ingest.reused == 2
        assert "lattice" in kb.search("Which tower stands in Paris?", k=1)[0].text


def test_interrupted_run_leaves_the_previous_version_searchable(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    (corpus / "kb.jsonl").write_text('{"id": "kb-1", "text": "The Eiffel Tower was repainted in 2024."}\n'
                                     '{"id": "kb-9", "text": "The Tiber flows through Rome."}\n'
                                     '{"id": "kb-10", "text": "The Seine flows through Paris."}\n')
    crash = FailingEmbedder(embedder, ok_calls=1)
    with pytest.raises(RuntimeError, match="simulated crash"):
        PgVectorKnowledgeBase.build(corpus, pg_url, crash, batch_size=1)
    assert crash.calls == [1]  # one chunk staged before the crash
    with KnowledgeBase.connect(pg_url, embedder) as kb:
        top = kb.search("Which tower stands in Paris?", k=1)[0]
        assert (top.id, top.text) == ("kb-1#0", "The Eiffel Tower is a wrought-iron tower in Paris, France.")
        assert len(kb) == 8 and "kb-9" not in {p.id.split("#")[0] for p in kb.search("Tiber Rome", k=8)}
    spy = SpyEmbedder(embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, spy, batch_size=1) as kb:
        assert kb.last_ingest.embedded == 2 and kb.last_ingest.reused == 1  # the staged chunk is kept
        assert kb.search("Which tower stands in Paris?", k=1)[0].text == "The Eiffel Tower was repainted in 2024."
        assert len(kb) == 8


def test_embedding_model_mismatch_is_a_clear_error(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    other = SpyEmbedder(embedder)
    other.name = "some/other-model"
    shown = DatabaseURL.parse(pg_url).display
    message = (f"knowledge base at {shown} was built with 'sentence-transformers/all-MiniLM-L6-v2' (384d), "
               f"not 'some/other-model' (384d); use that model or index into another table")
    with pytest.raises(KnowledgeBaseError) as err:
        KnowledgeBase.connect(pg_url, other)
    assert str(err.value) == message
    with pytest.raises(KnowledgeBaseError, match="was built with 'sentence-transformers/all-MiniLM-L6-v2'"):
        PgVectorKnowledgeBase.build(corpus, pg_url, other)
    assert other.calls == []
    with pytest.raises(KnowledgeBaseError, match=r"built with \{'m': 16, 'ef_construction': 64\}, not \{'m': 32\}"):
        PgVectorKnowledgeBase.build(corpus, pg_url, embedder, hnsw={"m": 32})
    spy = SpyEmbedder(embedder)  # ef_search is a query-time setting: it may change, nothing is embedded
    with PgVectorKnowledgeBase.build(corpus, pg_url, spy, hnsw={"ef_search": 40}) as kb:
        assert spy.calls == [] and kb.ef_search == 40 and kb.manifest["index"]["ef_search"] == 40


def test_missing_table_and_bad_url(pg_server):
    url = kb_url(pg_server, "nothing_here")
    with pytest.raises(KnowledgeBaseError, match=r"no knowledge base at .*table=nothing_here; build it with "
                                                 r"python -m program index PATH --kb"):
        KnowledgeBase.connect(url)
    with pytest.raises(ValueError, match="bad table name 'Drop;'"):
        KnowledgeBase.connect("postgresql://u@h/db?table=Drop;")
    parsed = DatabaseURL.parse("postgresql://ann:secret@db.example:5433/kb?sslmode=require&table=docs")
    assert parsed.table == "docs" and parsed.conninfo == "postgresql://ann:secret@db.example:5433/kb?sslmode=require"
    assert "secret" not in str(parsed) and str(parsed).startswith("postgresql://ann:***@db.example:5433/kb?")


def test_a_dropped_connection_is_retried(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        killed = []

        def killed_once(conn):  # the server ends this backend the first time, as a restart would
            if not killed:
                killed.append(conn.info.backend_pid)
                conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            return conn.info.backend_pid

        pid = kb._db.run(killed_once, what="test")
        assert killed and pid != killed[0]
        with psycopg.connect(DatabaseURL.parse(pg_url).conninfo, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE pid <> pg_backend_pid() AND datname = current_database() "
                          "AND backend_type = 'client backend'")
        assert ids(kb.search("Which tower stands in Paris?", k=1)) == ["kb-1#0"]


def test_an_unreachable_server_is_a_clear_error_after_bounded_retries(tmp_path, embedder):
    server = start(tmp_path / "pg")
    url = kb_url(server, "docs")
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, url, embedder).close()
    kb = PgVectorKnowledgeBase.connect(url, embedder, attempts=2, timeout=1.0)
    assert ids(kb.search("Which tower stands in Paris?", k=1)) == ["kb-1#0"]
    server.cleanup()  # the server stops
    with pytest.raises(KnowledgeBaseUnavailable, match=r"^cannot reach the knowledge base at postgresql://.*"
                                                       r"table=docs: search failed 2 times, last: "):
        kb.search("Which tower stands in Paris?", k=1)
    kb.close()
    with pytest.raises(KnowledgeBaseUnavailable, match="open failed 1 times"):
        PgVectorKnowledgeBase.connect(url, embedder, attempts=1, timeout=0.5)


def test_database_retries_are_bounded(pg_url):
    db = Database(DatabaseURL.parse(pg_url), attempts=3, backoff=0.01)
    calls = []

    def always_killed(conn):
        calls.append(1)
        conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

    with pytest.raises(KnowledgeBaseUnavailable, match="test failed 3 times"):
        db.run(always_killed, what="test")
    assert len(calls) == 3
    with pytest.raises(psycopg.errors.UndefinedTable):  # SQL errors are not retried
        db.run(lambda c: c.execute("SELECT * FROM no_such_table"), what="test")
    db.close()


def test_a_pdf_chunk_keeps_its_page_in_postgres(tmp_path, pg_url, embedder):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "paper.pdf").write_bytes((DOCUMENTS / "pdflatex-4-pages.pdf").read_bytes())
    faiss_kb = KnowledgeBase.build(corpus, tmp_path / "idx", embedder=embedder)
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        assert [(c.chunk_id, c.page) for c in kb.chunks] == [(c.chunk_id, c.page) for c in faiss_kb.chunks]
        assert sorted({c.page for c in kb.chunks}) == [1, 2, 3, 4]
        for mode in ("hybrid", "dense", "lexical"):
            ours = kb.search("Lorem ipsum dolor", k=4, mode=mode)
            theirs = faiss_kb.search("Lorem ipsum dolor", k=4, mode=mode)
            assert [(p.id, p.page) for p in ours] == [(p.id, p.page) for p in theirs], mode
            assert all(p.page >= 1 for p in ours), mode


def test_a_table_built_before_pages_gets_its_page_column_on_open(tmp_path, pg_url, embedder):
    corpus = write_corpus(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    as_an_earlier_version(pg_url, 'ALTER TABLE "{t}" DROP COLUMN page', 'ALTER TABLE "{t}_staging" DROP COLUMN page')
    with KnowledgeBase.connect(pg_url, embedder) as kb:
        hit = kb.search("Which tower stands in Paris?", k=1)[0]
        assert (hit.id, hit.page) == ("kb-1#0", 0)
    (corpus / "more.md").write_text("# Rivers\n\nThe Nile flows north through Egypt.\n")
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        assert kb.last_ingest.published == ["more.md"] and kb.search("river in Egypt", k=1)[0].id == "more.md#0"
