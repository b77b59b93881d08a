"""Corpus loading, chunking, embeddings and the on-disk knowledge base (real MiniLM embedder)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from program.retrieval import (Chunk, CorpusError, Document, Embedder, IndexNotFoundError, KnowledgeBase,
                               KnowledgeBaseError, chunk_document, count_tokens, get_embedder, load_documents)
from program.text import SPLITTER_VERSION
from program.types import Passage


class SpyEmbedder:
    """Wraps the real embedder and counts texts passed to ``encode``."""

    def __init__(self, inner: Embedder, fail: bool = False):
        self.inner, self.name, self.dimensions, self.fail = inner, inner.name, inner.dimensions, fail
        self.calls: list[int] = []

    def encode(self, texts):
        self.calls.append(len(texts))
        if self.fail:
            raise RuntimeError("simulated crash while embedding")
        return self.inner.encode(texts)


HTML = """<html><head><title>Volcano Facts</title><style>body{color:red}</style></head>
<body><nav>Home | About</nav><header>Site header</header>
<h1>Volcanoes</h1><p>Mount Etna is an active <b>stratovolcano</b> on the east coast of Sicily.</p>
<script>var x = "secret script text";</script>
<h2>Eruptions</h2><p>Etna erupted in 2021 with lava fountains.</p><footer>Copyright footer</footer></body></html>"""


def write_corpus(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "cats.md").write_text("# Cats\n\nThe domestic cat purrs and hunts mice.\n\n"
                                  "## Diet\n\nCats are obligate carnivores that eat meat.\n")
    (root / "sub").mkdir(exist_ok=True)
    (root / "sub" / "tea.txt").write_text("Green tea comes from the leaves of Camellia sinensis.\n")
    (root / "volcano.html").write_text(HTML)
    rows = [{"doc_id": "kb-1", "text": "The Eiffel Tower is a wrought-iron tower in Paris, France."},
            {"id": "kb-2", "title": "Rome", "paragraphs": ["Rome is the capital of Italy.",
                                                           "The Colosseum is an amphitheatre in Rome."]},
            {"url": "https://example.org/nile", "content": "The Nile is a river flowing north through Egypt."}]
    (root / "kb.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    (root / "data.rtf").write_text("a,b\n1,2\n")
    return root


# ---------------------------------------------------------------- corpus
def test_load_documents_folder(tmp_path):
    report = {}
    docs = {d.doc_id: d for d in load_documents(write_corpus(tmp_path / "c"), report=report)}
    assert sorted(docs) == ["cats.md", "https://example.org/nile", "kb-1", "kb-2", "sub/tea.txt", "volcano.html"]
    assert report["files"] == 4 and len(report["skipped_files"]) == 1 and report["skipped_files"][0].endswith(
        "data.rtf")
    assert docs["cats.md"].title == "Cats" and docs["sub/tea.txt"].title == "tea"
    assert docs["kb-2"].text == "Rome is the capital of Italy.\n\nThe Colosseum is an amphitheatre in Rome."
    assert docs["kb-2"].title == "Rome" and docs["https://example.org/nile"].url == "https://example.org/nile"
    html = docs["volcano.html"]
    assert html.title == "Volcano Facts"
    assert html.text == ("# Volcanoes\n\nMount Etna is an active stratovolcano on the east coast of Sicily.\n\n"
                         "## Eruptions\n\nEtna erupted in 2021 with lava fountains.")


def test_load_documents_is_deterministic(tmp_path):
    root = write_corpus(tmp_path / "c")
    assert [d.doc_id for d in load_documents(root)] == [d.doc_id for d in load_documents(root)]


def test_malformed_jsonl_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"doc_id": "a", "text": "fine"}\n\n{"doc_id": "b", "text": "broken\n')
    with pytest.raises(CorpusError, match=r"bad\.jsonl:3"):
        load_documents(bad)
    bad.write_text('{"doc_id": "a", "title": "no text"}\n')
    with pytest.raises(CorpusError, match=r"bad\.jsonl:1: no text field"):
        load_documents(bad)
    bad.write_text('["not", "an", "object"]\n')
    with pytest.raises(CorpusError, match="expected an object"):
        load_documents(bad)
    assert issubclass(CorpusError, ValueError)


def test_corpus_errors(tmp_path):
    (tmp_path / "only.rtf").write_text("x")
    with pytest.raises(CorpusError, match="unsupported corpus file type '.rtf'"):
        load_documents(tmp_path / "only.rtf")
    with pytest.raises(CorpusError, match="empty corpus"):
        load_documents(tmp_path)
    with pytest.raises(CorpusError, match="no such file or folder"):
        load_documents(tmp_path / "nope")
    (tmp_path / "dup.jsonl").write_text('{"id": "x", "text": "a"}\n{"id": "x", "text": "b"}\n')
    with pytest.raises(CorpusError, match="duplicate document id 'x'"):
        load_documents(tmp_path / "dup.jsonl")


def test_non_utf8_bytes_are_refused_with_their_offset(tmp_path):
    # replacing them indexed "Caf\ufffd au lait", which no search for "café" finds
    (tmp_path / "latin.txt").write_bytes(b"Caf\xe9 au lait")
    with pytest.raises(CorpusError, match=r"latin\.txt is not UTF-8 text: byte 0xe9 at offset 3 \(line 1\)"):
        load_documents(tmp_path / "latin.txt")


# ---------------------------------------------------------------- chunking
def words(n, tag):
    return " ".join(f"{tag}{i}" for i in range(n))


def test_chunking_packs_paragraphs_under_headings():
    text = (f"Intro {words(9, 'i')}.\n\n# Alpha\n\n{words(50, 'a')}.\n\n{words(50, 'b')}.\n\n"
            f"{words(50, 'c')}.\n\n## Beta\n\nShort beta paragraph.")
    chunks = chunk_document(Document("d", text, "Doc", "/x/d.md", "http://d"), target_tokens=140,
                            max_tokens=200, overlap_tokens=0)
    assert [c.chunk_id for c in chunks] == ["d#0", "d#1", "d#2", "d#3"]
    assert [c.heading for c in chunks] == ["", "Alpha", "Alpha", "Beta"]
    assert chunks[1].text == f"{words(50, 'a')}.\n\n{words(50, 'b')}."  # 2 × 66 tokens packed
    assert chunks[2].text == f"{words(50, 'c')}."
    assert chunks[3].text == "Short beta paragraph." and "#" not in chunks[3].text
    assert (chunks[0].title, chunks[0].url, chunks[0].source_path) == ("Doc", "http://d", "/x/d.md")


def test_chunking_splits_long_paragraph_on_sentences_with_overlap():
    sentences = [f"Sentence {i} " + words(10, f"s{i}w") + "." for i in range(30)]  # 12 words each
    chunks = chunk_document(Document("long", " ".join(sentences), "", ""), target_tokens=100,
                            max_tokens=150, overlap_tokens=20)
    assert len(chunks) > 3
    assert all(count_tokens(c.text) <= 150 for c in chunks)
    assert chunks[0].text.startswith("Sentence 0 ")
    for prev, nxt in zip(chunks, chunks[1:]):
        last_sentence = prev.text.rsplit("Sentence ", 1)[1]
        assert nxt.text.startswith("Sentence " + last_sentence)  # one 16-token sentence carried over
    joined = " ".join(c.text for c in chunks)
    assert all(s in joined for s in sentences)


def test_chunking_word_windows_and_validation():
    chunks = chunk_document(Document("w", words(500, "x"), "", ""), 200, 300, 0)
    assert [len(c.text.split()) for c in chunks] == [230, 230, 40]
    assert chunk_document(Document("e", "   ", "", ""), 200, 300, 30) == []
    with pytest.raises(ValueError, match="target_tokens <= max_tokens"):
        chunk_document(Document("v", "x", "", ""), 300, 200, 10)
    with pytest.raises(ValueError, match="overlap_tokens < target_tokens"):
        chunk_document(Document("v", "x", "", ""), 100, 200, 100)
    assert count_tokens("one two three four five six seven eight nine ten") == 13


# ---------------------------------------------------------------- embedding
def test_embedder_shapes_and_similarity(embedder):
    vecs = embedder.encode(["A cat sits on the mat.", "A kitten rests on a rug.", "Stock markets fell today."])
    assert vecs.shape == (3, 384) and vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert vecs[0] @ vecs[1] > vecs[0] @ vecs[2] + 0.2
    assert embedder.encode([]).shape == (0, 384)
    assert embedder.dimensions == 384 and embedder.name == "sentence-transformers/all-MiniLM-L6-v2"
    assert get_embedder() is embedder
    with pytest.raises(TypeError):
        embedder.encode("not a list")


# ---------------------------------------------------------------- knowledge base
def test_build_search_manifest_and_reuse(tmp_path, embedder):
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    spy = SpyEmbedder(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy)
    assert spy.calls == [len(kb), len(kb.vocabulary)]  # the chunks, then the vocabulary's terms
    assert [c.chunk_id for c in kb.chunks] == ["cats.md#0", "cats.md#1", "kb-1#0", "kb-2#0",
                                               "https://example.org/nile#0", "sub/tea.txt#0", "volcano.html#0",
                                               "volcano.html#1"]
    top = kb.search("Which tower stands in Paris?", k=2)
    assert isinstance(top[0], Passage) and top[0].id == "kb-1#0" and top[0].source == "kb"
    assert top[0].score > top[1].score and 0.3 < top[0].score <= 1.0
    assert kb.search("What do cats eat?", k=1)[0].id == "cats.md#1"
    assert kb.search("When did Etna erupt?", k=1)[0].id == "volcano.html#1"
    tea = kb.search("source plant of green tea", k=1)[0]
    assert tea.id == "sub/tea.txt#0" and tea.url.endswith("tea.txt")
    assert kb.search("   ") == [] and len(kb.search("Paris", k=50)) == len(kb) == 8

    m = json.loads((idx / "manifest.json").read_text())
    assert m["format_version"] == 1 and m["chunk_count"] == 8 and m["documents"] == 6
    assert m["embedding"] == {"model": "sentence-transformers/all-MiniLM-L6-v2", "dimensions": 384}
    assert (m["chunking"]["target_tokens"], m["chunking"]["max_tokens"],
            m["chunking"]["overlap_tokens"]) == (200, 300, 30)
    assert sorted(m["files"]) == ["cats.md", "kb.jsonl", "sub/tea.txt", "volcano.html"]
    assert all(len(h) == 64 for h in m["files"].values()) and m["created"].endswith("+00:00")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "idx"]  # no temp folders left

    spy2 = SpyEmbedder(embedder)
    again = KnowledgeBase.build(corpus, idx, embedder=spy2)
    assert spy2.calls == [] and len(again) == 8 and again.manifest["created"] == m["created"]
    assert again.search("Which tower stands in Paris?", k=1)[0].id == "kb-1#0"
    assert spy2.calls == [1]  # only the query was embedded

    loaded = KnowledgeBase.load(idx, embedder=embedder)
    assert [c.chunk_id for c in loaded.chunks] == [c.chunk_id for c in kb.chunks]


def test_changes_trigger_rebuild(tmp_path, embedder):
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    (corpus / "sub" / "tea.txt").write_text("Black tea is oxidised more than green tea.\n\nOolong sits between.")
    spy = SpyEmbedder(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy)
    # only the changed file's one chunk is embedded; the other 7 keep their vectors
    assert spy.calls[0] == 1 and "Oolong" in kb.chunks[5].text
    assert kb.changes.line() == "1 changed; 7 chunks kept"
    spy = SpyEmbedder(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy, target_tokens=150)
    assert spy.calls[0] == 8
    assert kb.changes.line().startswith("rebuilt: the chunking changed (target_tokens 200 -> 150")
    assert json.loads((idx / "manifest.json").read_text())["chunking"]["target_tokens"] == 150


def test_an_index_cut_by_another_sentence_splitter_is_rebuilt(tmp_path, embedder):
    # the bug: an index cut by the old regular expressions was reused after the splitter
    # changed, and 49 of PopQA's 1,715 chunks differed from a fresh build
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    manifest = json.loads((idx / "manifest.json").read_text())
    assert manifest["chunking"]["sentences"] == SPLITTER_VERSION
    manifest["chunking"]["sentences"] = "regex"
    (idx / "manifest.json").write_text(json.dumps(manifest))
    spy = SpyEmbedder(embedder)
    KnowledgeBase.build(corpus, idx, embedder=spy)
    assert spy.calls[0] == 8
    assert json.loads((idx / "manifest.json").read_text())["chunking"]["sentences"] == SPLITTER_VERSION


def test_crash_during_rebuild_keeps_old_index(tmp_path, embedder):
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    before = (idx / "manifest.json").read_text()
    (corpus / "kb.jsonl").write_text('{"id": "new", "text": "Something new."}\n')
    with pytest.raises(RuntimeError, match="simulated crash"):
        KnowledgeBase.build(corpus, idx, embedder=SpyEmbedder(embedder, fail=True))
    assert (idx / "manifest.json").read_text() == before
    assert len(KnowledgeBase.load(idx)) == 8
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "idx"]


def test_load_errors(tmp_path, embedder):
    with pytest.raises(IndexNotFoundError, match=r"no knowledge-base index .* \(missing manifest.json"):
        KnowledgeBase.load(tmp_path / "none")
    corpus, idx = write_corpus(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    lines = (idx / "chunks.jsonl").read_text().splitlines()
    (idx / "chunks.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(KnowledgeBaseError, match="inconsistent index .* 8 vectors .* 7 chunks"):
        KnowledgeBase.load(idx)
    (idx / "chunks.jsonl").write_text("{not json\n")
    with pytest.raises(KnowledgeBaseError, match="corrupt index"):
        KnowledgeBase.load(idx)
    spy = SpyEmbedder(embedder)
    assert len(KnowledgeBase.build(corpus, idx, embedder=spy)) == 8 and spy.calls[0] == 8  # repaired
    other = SpyEmbedder(embedder)
    other.name = "some/other-model"
    with pytest.raises(KnowledgeBaseError, match="built with 'sentence-transformers/all-MiniLM-L6-v2'"):
        KnowledgeBase.load(idx, embedder=other)
    assert isinstance(Chunk("a#0", "a", "t"), Chunk)


def test_a_file_linking_outside_the_folder_is_left_out_unless_the_operator_follows_it(tmp_path, monkeypatch):
    from program.retrieval.corpus import left_out, list_source_files, outside_links

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# A\n\nInside.\n")
    (docs / "b.md").symlink_to(docs / "a.md")  # inside: read
    (tmp_path / "secret.md").write_text("# S\n\nOutside.\n")
    (docs / "passwd.md").symlink_to(tmp_path / "secret.md")
    assert [f.name for f in list_source_files(docs)[0]] == ["a.md", "b.md"]
    assert left_out(docs) == [f"passwd.md: links outside the knowledge base (to {tmp_path / 'secret.md'}); "
                              "CRAG_OUTSIDE_LINKS=follow reads it"]
    assert outside_links(docs) == [f"passwd.md -> {tmp_path / 'secret.md'}"]
    monkeypatch.setenv("CRAG_OUTSIDE_LINKS", "follow")
    assert [f.name for f in list_source_files(docs)[0]] == ["a.md", "b.md", "passwd.md"] and left_out(docs) == []
    monkeypatch.setenv("CRAG_OUTSIDE_LINKS", "sometimes")
    with pytest.raises(CorpusError, match="CRAG_OUTSIDE_LINKS must be follow or refuse, got 'sometimes'"):
        list_source_files(docs)
