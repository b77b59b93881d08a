"""Hybrid retrieval: BM25 beside the vectors in the faiss index (built, saved, reused, upgraded),
reciprocal rank fusion, the fused SQL statement of the pgvector knowledge base against a real
PostgreSQL, and the correction's rewrite fused with the question's results."""

from __future__ import annotations

import collections
import json
import logging
import shutil

import psycopg
import pytest
from pgvector.psycopg import register_vector

from program.retrieval import KnowledgeBase
from program.retrieval.base import embed_text
from program.retrieval.fusion import HYBRID, FusionParams, fuse_passages, rrf
from program.retrieval.lexical import LexicalIndex, tokens
from program.retrieval.postgres import PgVectorKnowledgeBase, hybrid
from program.retrieval.postgres.url import DatabaseURL
from program.types import Passage
from tests.postgres import as_an_earlier_version
from tests.test_retrieval import SpyEmbedder, write_corpus

# a term no question's embedding brings near: only the lexical index finds its chunk
RARE = ("Tea leaves are picked by hand in spring and dried in the sun; the pickers log each basket "
        "under code QX-4471 before the leaves are rolled.")
QUERY = "qx-4471 error"


def corpus_with_rare_term(root):
    write_corpus(root)
    (root / "flags.md").write_text("# Tea harvest\n\n" + RARE + "\n")
    return root


def ids(passages):
    return [p.id for p in passages]


def test_rrf_sums_reciprocal_ranks_and_interleaves_ties():
    fused = rrf([["a", "b", "c"], ["c", "d", "a"]], k=60)
    assert [i for i, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == pytest.approx(1 / 61 + 1 / 63) and fused[2][1] == pytest.approx(1 / 62)
    assert [i for i, _ in rrf([["a", "b"], ["x", "y"]])] == ["a", "x", "b", "y"]
    assert [i for i, _ in rrf([["a", "b"], ["x", "y"]], weights=[1.0, 2.0])] == ["x", "y", "a", "b"]
    with pytest.raises(ValueError, match="rrf: 1 weights for 2 rankings"):
        rrf([["a"], ["b"]], weights=[1.0])
    with pytest.raises(ValueError, match="fusion parameters out of range"):
        FusionParams(k=0)
    p = [Passage(id=i, text=i, source="kb", score=s) for i, s in (("a", .9), ("b", .5))]
    q = [Passage(id="b", text="b", source="kb", score=.1), Passage(id="c", text="c", source="kb", score=.4)]
    fused_passages = fuse_passages([p, q])
    assert ids(fused_passages) == ["b", "a", "c"] and fused_passages[0].score == .5


def test_tokens_follow_postgresql_english():
    assert tokens("Dry-run the Pods, don't CrashLoopBackOff!") == ["dry-run", "dri", "run", "pod", "crashloopbackoff"]
    assert tokens("the and of") == []


def test_lexical_index_finds_a_term_the_vectors_miss(tmp_path, embedder):
    kb = KnowledgeBase.build(corpus_with_rare_term(tmp_path / "c"), tmp_path / "idx", embedder=embedder)
    query = QUERY
    dense = kb.search(query, k=3, mode="dense")
    assert ids(dense) == ["kb-2#0", "flags.md#0", "kb-1#0"]  # the sentence vector blurs the code
    assert ids(kb.search(query, k=3, mode="lexical")) == ["flags.md#0"]  # the only chunk writing it
    hybrid = kb.search(query, k=3)
    assert ids(hybrid) == ["flags.md#0", "kb-2#0", "kb-1#0"]  # in both lists: 1/(10 + 2) + 0.75/(10 + 1)
    rare = hybrid[0]  # scored by its cosine, as dense search scores
    chunk = next(c for c in kb.chunks if c.chunk_id == "flags.md#0")
    cosine = float(embedder.encode([query])[0] @ embedder.encode([embed_text(chunk)])[0])
    assert rare.score == pytest.approx(cosine, abs=1e-4)
    assert kb.search("What do cats eat?", k=1)[0].id == "cats.md#1"
    with pytest.raises(ValueError, match="search mode must be one of hybrid, dense, lexical, got 'bm25'"):
        kb.search("cats", mode="bm25")


def test_lexical_index_is_built_saved_and_reused_with_the_vectors(tmp_path, embedder, monkeypatch):
    corpus, idx = corpus_with_rare_term(tmp_path / "c"), tmp_path / "idx"
    kb = KnowledgeBase.build(corpus, idx, embedder=embedder)
    assert kb.manifest["lexical"] == {"library": "bm25s", "method": "lucene", "k1": 1.2, "b": 0.75,
                                      "tokens": "postgresql-english"}
    record = json.loads((idx / "lexical" / "lexical.json").read_text())
    assert record["size"] == len(kb) == 9 and record["stamp"]["created"] == kb.manifest["created"]
    calls = []  # reuse must not tokenize the chunks again
    monkeypatch.setattr(LexicalIndex, "build", classmethod(lambda cls, texts: calls.append(len(texts))))
    again = KnowledgeBase.build(corpus, idx, embedder=embedder)
    assert ids(again.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"] and calls == []
    monkeypatch.undo()
    (corpus / "flags.md").write_text("# Settings\n\nThe flag --zz9-other-knob sets something else.\n")
    rebuilt = KnowledgeBase.build(corpus, idx, embedder=embedder)  # a changed corpus: both rebuilt
    assert rebuilt.search(QUERY, k=3, mode="lexical") == []
    assert ids(rebuilt.search("zz9-other-knob", k=1, mode="lexical")) == ["flags.md#0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "idx"]  # no temporary folders left


def test_an_index_saved_before_hybrid_search_is_upgraded_with_a_warning(tmp_path, embedder, caplog):
    corpus, idx = corpus_with_rare_term(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    shutil.rmtree(idx / "lexical")  # as an index of the previous release
    manifest = json.loads((idx / "manifest.json").read_text())
    del manifest["lexical"]
    (idx / "manifest.json").write_text(json.dumps(manifest))
    spy = SpyEmbedder(embedder)
    with caplog.at_level(logging.WARNING, logger="program.retrieval.index"):
        kb = KnowledgeBase.build(corpus, idx, embedder=spy)
        assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"index {idx} has no lexical index (built before hybrid search): "
                        f"building it from its 9 stored chunks"]
    assert spy.calls == [1]  # the query only: the chunks were not embedded again
    assert (idx / "lexical" / "lexical.json").is_file()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="program.retrieval.index"):
        reopened = KnowledgeBase.load(idx, embedder=embedder)
        assert ids(reopened.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
    assert caplog.records == []  # saved by the upgrade, so loaded now


def test_fused_sql_matches_faiss_hybrid_on_a_real_postgresql(tmp_path, pg_url, embedder):
    corpus = corpus_with_rare_term(tmp_path / "c")
    faiss_kb = KnowledgeBase.build(corpus, tmp_path / "idx", embedder=embedder)
    queries = ["Which tower stands in Paris?", "What do cats eat?", QUERY,
               "Camellia sinensis leaves", "wrought-iron", "obligate carnivores eat meat"]
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
        assert ids(kb.search(QUERY, k=1, mode="dense")) == ["kb-2#0"] and ids(kb.search(QUERY, k=1)) == ["flags.md#0"]
        for q in queries:
            for mode in ("hybrid", "lexical", "dense"):
                ours, theirs = kb.search(q, k=4, mode=mode), faiss_kb.search(q, k=4, mode=mode)
                assert ids(ours) == ids(theirs), (q, mode)
                assert [p.score for p in ours] == pytest.approx([p.score for p in theirs], abs=1e-5)
        assert ids(kb.search("cats", k=5, document="cats.md")) == ["cats.md#0", "cats.md#1"]
        weighted = FusionParams(k=10, lexical=2.0, depth=5)
        assert ids(kb.search(QUERY, k=3, fusion=weighted)) == \
               ids(faiss_kb.search(QUERY, k=3, fusion=weighted))
        with_feedback = FusionParams(k=10, lexical=2.0, depth=5, feedback=4)
        for q in queries:
            assert ids(kb.search(q, k=4, fusion=with_feedback)) == ids(faiss_kb.search(q, k=4, fusion=with_feedback)), q
        assert kb.manifest["lexical"]["chunks"] == 9
        table = DatabaseURL.parse(pg_url).table
        with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
            indexdef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                    [f"{table}_postings_by_impact"]).fetchone()[0]
            keydef = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = %s",
                                  [f"{table}_postings_pkey"]).fetchone()[0]
            postings = {(r[0], r[1]): r[2]
                        for r in conn.execute(f'SELECT chunk_id, lexeme, tf FROM "{table}_postings"')}
            pages, visible = conn.execute("SELECT relpages, relallvisible FROM pg_class WHERE relname = %s",
                                          [f"{table}_postings"]).fetchone()
        assert pages > 0 and visible == pages  # the index run vacuumed them: index-only scans skip the table
        # every posting the statement reads is in an index: no table page is visited for it
        assert "(lexeme, impact DESC) INCLUDE (source_file, chunk_id, tf, dl)" in indexdef
        assert "(lexeme, source_file, chunk_id) INCLUDE (tf, dl)" in keydef
        # the faiss index's own tokens (PostgreSQL's parser keeps "k8s.io" whole, stems "internal" to "intern")
        assert postings == {(c.chunk_id, t): n for c in faiss_kb.chunks
                            for t, n in collections.Counter(tokens(embed_text(c))).items()}


def test_a_table_with_the_previous_impact_index_gets_the_covering_one_on_connect(tmp_path, pg_url, embedder, caplog):
    corpus = corpus_with_rare_term(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    table = DatabaseURL.parse(pg_url).table
    as_an_earlier_version(pg_url, 'DROP INDEX "{t}_postings_by_impact"',
                          'CREATE INDEX "{t}_postings_impact" ON "{t}_postings" (lexeme, impact DESC)',
                          """UPDATE "{t}_meta" SET manifest = """
                          """jsonb_set(manifest, '{lexical,format}', '"postings-1"')""")
    with caplog.at_level(logging.WARNING, logger="program.retrieval.postgres.store"):
        with PgVectorKnowledgeBase.connect(pg_url, embedder) as kb:
            assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        "rebuilt its BM25 postings' index (indexed by an earlier version)"]
    with caplog.at_level(logging.WARNING, logger="program.retrieval.postgres.store"):
        with PgVectorKnowledgeBase.connect(pg_url, embedder) as kb:  # upgraded once
            assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
    assert len(caplog.records) == 1
    with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
        names = {r[0] for r in conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = %s",
                                            [f"{table}_postings"])}
    assert f"{table}_postings_by_impact" in names and f"{table}_postings_impact" not in names


def test_a_table_indexed_before_hybrid_search_is_upgraded_on_connect(tmp_path, pg_url, embedder, caplog):
    corpus = corpus_with_rare_term(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    as_an_earlier_version(pg_url, 'DROP TABLE "{t}_postings", "{t}_lexicon"',  # as before hybrid search
                          """UPDATE "{t}_meta" SET manifest = manifest - 'lexical'""")
    with caplog.at_level(logging.WARNING, logger="program.retrieval.postgres.store"):
        with PgVectorKnowledgeBase.connect(pg_url, embedder) as kb:
            assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
            assert kb.manifest["lexical"]["chunks"] == 9
    assert [r.getMessage() for r in caplog.records] == [
        f"knowledge base at {DatabaseURL.parse(pg_url)} had no BM25 postings (indexed by an earlier version): "
        "wrote them for its 9 chunks"]


def test_a_table_with_the_full_text_column_of_the_last_release_is_upgraded(tmp_path, pg_url, embedder, caplog):
    """The last release ranked by PostgreSQL's own full-text column (``tsv``, a GIN index and a
    lexicon counted by ``ts_stat``): its tokens were not the faiss index's."""
    corpus = corpus_with_rare_term(tmp_path / "c")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    table = DatabaseURL.parse(pg_url).table
    with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
        conn.execute(f'DROP TABLE "{table}_postings"')
        conn.execute(f"""ALTER TABLE "{table}" ADD COLUMN tsv tsvector
                         GENERATED ALWAYS AS (to_tsvector('english', text)) STORED""")
        conn.execute(f'CREATE INDEX "{table}_tsv_gin" ON "{table}" USING gin (tsv)')
        conn.execute(f"""UPDATE "{table}_meta" SET manifest = manifest #- '{{lexical,format}}'""")
    with caplog.at_level(logging.WARNING, logger="program.retrieval.postgres.store"):
        with PgVectorKnowledgeBase.connect(pg_url, embedder) as kb:
            assert ids(kb.search(QUERY, k=1, mode="lexical")) == ["flags.md#0"]
    assert len(caplog.records) == 1 and "wrote them for its 9 chunks" in caplog.records[0].getMessage()
    with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
        assert conn.execute("SELECT to_regclass(%s)", [f"{table}_tsv_gin"]).fetchone()[0] is None
        assert conn.execute(f'SELECT count(DISTINCT chunk_id) FROM "{table}_postings"').fetchone()[0] == 9


def test_the_rewrite_is_fused_with_the_question_results():
    from program.retrieval.fusion import fuse_passages as fuse

    question = [Passage(id=i, text=i, source="kb", score=.5) for i in ("q1", "q2", "q3", "q4", "both")]
    rewrite = [Passage(id=i, text=i, source="kb", score=.4) for i in ("both", "r1", "r2")]
    seen = {"q1", "q2", "q3"}
    again = [p for p in fuse([question, rewrite]) if p.id not in seen][:3]
    # found by both first (1/61 + 1/65), then by rank: r1 (1/62), r2 (1/63) before q4 (1/64)
    assert ids(again) == ["both", "r1", "r2"]


def test_a_knowledge_base_without_a_single_lexical_term_still_indexes(tmp_path, embedder):
    """The bug: a corpus whose chunks hold only stop words made bm25s fail with
    "max() arg is an empty sequence" and index ended in that line."""
    assert LexicalIndex.build(["the and of", "to be or not to be"]).search("to be", 3) == []
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("To be or not to be.\n")
    kb = KnowledgeBase.build(tmp_path / "c", tmp_path / "idx", embedder=embedder)
    assert len(kb) == 1 and [p.id for p in kb.search("to be", 1)] == [kb.chunks[0].chunk_id]


def test_feedback_terms_weigh_occurrences_by_rarity_and_skip_the_question():
    from program.retrieval.feedback import feedback_terms

    df = {"cat": 9, "purr": 2, "meow": 1, "whisker": 5}.get
    chunks = [["cat", "purr", "purr", "meow"], ["purr", "whisker"]]
    # purr 3 * ln(10/2) = 4.83, meow 1 * ln(10) = 2.30, whisker 1 * ln(2) = 0.69; cat is asked
    assert feedback_terms(["cat"], chunks, df, 10, 2) == ["purr", "meow"]
    assert feedback_terms(["cat"], chunks, df, 10, 9) == ["purr", "meow", "whisker"]
    assert feedback_terms(["cat"], chunks, df, 10, 0) == []
    # equal weights go to the token first by code point, as PostgreSQL's COLLATE "C" sorts them
    assert feedback_terms([], [["b", "a"]], lambda t: 1, 4, 2) == ["a", "b"]


def test_the_lexical_index_counts_document_frequency():
    index = LexicalIndex.build(["Pods restart pods", "a pod and a node", "nodes drain"])
    assert (index.df("pod"), index.df("node"), index.df("drain"), index.df("unknown")) == (2, 2, 1, 0)


def test_bm25_ties_go_to_the_chunk_id_whatever_plan_postgresql_picks(tmp_path, pg_url, embedder):
    """The statement is prepared and runs a generic plan; a custom plan sums each chunk's terms in
    another order. Scores equal but for the last bits of that order must still tie (on a 100k
    synthetic corpus of near-copies 19 of 200 top-10 lists differed between the two plans)."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    for name in ("e", "b", "d", "a", "c"):  # the same words: the same BM25 score
        (corpus / f"{name}.md").write_text("The zq7 valve holds steam pressure near 4.2 bar in the boiler room, "
                                           "checked each shift by the valve crew.\n")
    (corpus / "other.md").write_text("Cats sleep most of the day.\n")
    query = "zq7 valve steam pressure bar shift crew boiler"
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as kb:
        prepared = [ids(kb.search(query, k=5, mode="lexical")) for _ in range(3)]
        table = DatabaseURL.parse(pg_url).table
        with psycopg.connect(DatabaseURL.parse(pg_url).conninfo) as conn:
            register_vector(conn)
            conn.execute("SET plan_cache_mode = force_custom_plan")
            vector = embedder.encode([query])[0]
            custom = [r[0] for r in conn.execute(hybrid.fused_query(table, []),
                                                 hybrid.parameters(query, vector, 5, "lexical", HYBRID)).fetchall()]
    assert prepared == [["a.md#0", "b.md#0", "c.md#0", "d.md#0", "e.md#0"]] * 3
    assert custom == prepared[0]
