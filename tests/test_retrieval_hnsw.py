"""HNSW knowledge-base index: same top hits as flat, recorded in the manifest, rebuilt on change."""

from __future__ import annotations

import json

import faiss
import numpy as np
import pytest

from program.retrieval import KnowledgeBase, KnowledgeBaseError
from program.retrieval.faiss_index import IndexSpec, build_index, stored_vectors
from tests.test_retrieval import SpyEmbedder, write_corpus

QUESTIONS = {"Which tower stands in Paris?": "kb-1#0", "What do cats eat?": "cats.md#1",
             "When did Etna erupt?": "volcano.html#1", "source plant of green tea": "sub/tea.txt#0"}


def manifest(idx):
    return json.loads((idx / "manifest.json").read_text())


def test_hnsw_matches_flat_and_records_type(tmp_path, embedder):
    corpus = write_corpus(tmp_path / "c")
    flat = KnowledgeBase.build(corpus, tmp_path / "flat", embedder=embedder)
    hnsw = KnowledgeBase.build(corpus, tmp_path / "hnsw", embedder=embedder,
                               index=IndexSpec("hnsw", m=16, ef_search=32))
    for question, chunk_id in QUESTIONS.items():
        top_flat, top_hnsw = flat.search(question, k=3), hnsw.search(question, k=3)
        assert top_flat[0].id == top_hnsw[0].id == chunk_id
        assert top_hnsw[0].score == pytest.approx(top_flat[0].score, abs=1e-5)
    assert manifest(tmp_path / "flat")["index"] == {"type": "flat", "metric": "inner_product"}
    assert manifest(tmp_path / "hnsw")["index"] == {"type": "hnsw", "metric": "inner_product", "M": 16,
                                                    "ef_construction": 40, "ef_search": 32}

    loaded = KnowledgeBase.load(tmp_path / "hnsw", embedder=embedder)
    assert isinstance(loaded._index, faiss.IndexHNSWFlat) and loaded._index.hnsw.efSearch == 32
    assert loaded.search("What do cats eat?", k=1)[0].id == "cats.md#1"
    assert isinstance(KnowledgeBase.load(tmp_path / "flat")._index, faiss.IndexFlatIP)


def test_changing_index_type_reindexes_without_embedding(tmp_path, embedder):
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    flat = KnowledgeBase.build(corpus, idx, embedder=embedder)
    vectors = stored_vectors(flat._index)

    spy = SpyEmbedder(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy, index="hnsw")
    assert spy.calls == []  # the saved vectors were re-indexed, nothing embedded
    assert manifest(idx)["index"]["type"] == "hnsw" and "reindexed" in manifest(idx)
    assert isinstance(KnowledgeBase.load(idx)._index, faiss.IndexHNSWFlat)
    assert np.allclose(stored_vectors(kb._index), vectors, atol=1e-6)
    assert kb.search("When did Etna erupt?", k=1)[0].id == "volcano.html#1"

    spy = SpyEmbedder(embedder)
    KnowledgeBase.build(corpus, idx, embedder=spy, index="hnsw")
    assert spy.calls == [] and manifest(idx)["index"]["ef_search"] == 64  # same spec: reused as is
    assert (idx / "vocabulary.json").is_file() and (idx / "vocabulary.npy").is_file()  # kept by re-indexing
    KnowledgeBase.build(corpus, idx, embedder=spy, index=IndexSpec("hnsw", ef_search=128))
    assert manifest(idx)["index"]["ef_search"] == 128
    assert KnowledgeBase.load(idx)._index.hnsw.efSearch == 128
    back = KnowledgeBase.build(corpus, idx, embedder=spy)  # default: flat again
    assert manifest(idx)["index"] == {"type": "flat", "metric": "inner_product"}
    assert isinstance(back._index, faiss.IndexFlatIP) and spy.calls == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "idx"]  # no temp folders left

    (corpus / "kb.jsonl").write_text('{"id": "new", "text": "Something new."}\n')
    spy = SpyEmbedder(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy, index="hnsw")  # a file changed: only it is read
    assert kb.changes.line() == "1 changed; 5 chunks kept"
    assert spy.calls[0] == 1 and spy.calls[1] < len(kb.vocabulary)  # its chunk, then only the new terms
    assert manifest(idx)["index"]["type"] == "hnsw"


def test_manifest_and_index_file_must_agree(tmp_path, embedder):
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder, index="hnsw")
    m = manifest(idx)
    m["index"] = {"type": "flat", "metric": "inner_product"}
    (idx / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(KnowledgeBaseError, match="holds a hnsw index, manifest says flat"):
        KnowledgeBase.load(idx)
    m["index"] = {"type": "ivf"}
    (idx / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(KnowledgeBaseError, match="bad index entry"):
        KnowledgeBase.load(idx)
    del m["index"]  # older manifests: flat
    (idx / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(KnowledgeBaseError, match="holds a hnsw index, manifest says flat"):
        KnowledgeBase.load(idx)
    spy = SpyEmbedder(embedder)
    assert len(KnowledgeBase.build(corpus, idx, embedder=spy, index="hnsw")) == 8 and spy.calls[0] == 8


def test_index_spec_validation_and_build_index():
    assert IndexSpec.coerce(None) == IndexSpec() == IndexSpec.from_manifest(None)
    assert IndexSpec.coerce("hnsw").to_manifest()["M"] == 32
    spec = IndexSpec("hnsw", 8, 20, 10)
    assert IndexSpec.from_manifest(spec.to_manifest()) == spec
    with pytest.raises(ValueError, match="index type must be one of flat, hnsw"):
        IndexSpec("ivf")
    with pytest.raises(ValueError, match="m=1"):
        IndexSpec("hnsw", m=1)
    with pytest.raises(ValueError, match=r"shape \(n, d\)"):
        build_index(IndexSpec(), np.zeros(4, dtype=np.float32))
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    flat, hnsw = build_index(IndexSpec(), vecs), build_index(IndexSpec("hnsw", ef_search=64), vecs)
    assert flat.ntotal == hnsw.ntotal == 300 and build_index(IndexSpec("hnsw"), vecs[:0]).ntotal == 0
    (_, top_flat), (_, top_hnsw) = flat.search(vecs[:20], 1), hnsw.search(vecs[:20], 1)
    assert (top_flat[:, 0] == np.arange(20)).all() and (top_hnsw[:, 0] == np.arange(20)).all()
