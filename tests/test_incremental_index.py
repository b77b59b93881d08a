"""Indexing a changed folder reads and embeds only what changed, and ends as a full build would:
the same chunk ids in the same order, the same vectors (within float tolerance), the same search
results; what changed is said in one line; another chunking or embedder builds everything again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from program.retrieval import KnowledgeBase, building
from program.retrieval.faiss_index import stored_vectors
from tests.test_retrieval import SpyEmbedder

ROOT = Path(__file__).resolve().parent.parent
HANDBOOK = sorted((ROOT / "eval_sets" / "handbook" / "kb").glob("*.md"))


def _corpus(folder: Path) -> Path:
    """Eight handbook pages, a JSONL file of two documents and a text file."""
    folder.mkdir(parents=True)
    for page in HANDBOOK[:8]:
        shutil.copy(page, folder / page.name)
    (folder / "faq.jsonl").write_text(json.dumps({"id": "faq-1", "title": "Parking", "text": "Parking permits are "
                                                 "renewed every January at the front desk."}) + "\n"
                                      + json.dumps({"id": "faq-2", "text": "Badges are collected on the last day."})
                                      + "\n")
    (folder / "notes.txt").write_text("The cafeteria opens at eight and closes at three.\n")
    return folder


def _questions(kb) -> list[str]:
    return list(dict.fromkeys(c.heading for c in kb.chunks if c.heading))[:40] + [
        "When are parking permits renewed?", "When does the cafeteria open?", "remote work equipment"]


def _same_index(incremental, full, questions) -> None:
    assert [c.chunk_id for c in incremental.chunks] == [c.chunk_id for c in full.chunks]
    assert [c.text for c in incremental.chunks] == [c.text for c in full.chunks]
    np.testing.assert_allclose(stored_vectors(incremental._index), stored_vectors(full._index), atol=2e-6)
    for mode in ("hybrid", "dense", "lexical"):
        assert [[p.id for p in hits] for hits in incremental.search_batch(questions, 5, mode)] == \
               [[p.id for p in hits] for hits in full.search_batch(questions, 5, mode)], mode
    assert incremental.vocabulary.terms == full.vocabulary.terms
    np.testing.assert_allclose(incremental.vocabulary.vectors, full.vocabulary.vectors, atol=2e-6)
    for key in ("files", "file_chunks", "documents", "chunk_count", "embedding", "chunking"):
        assert incremental.manifest[key] == full.manifest[key], key


def test_a_changed_added_and_deleted_file_end_as_a_full_build(tmp_path, embedder):
    docs, index = _corpus(tmp_path / "docs"), tmp_path / "index"
    first = KnowledgeBase.build(docs, index, embedder)
    assert first.changes.line() == "new index: 10 file(s) read"
    edited = docs / HANDBOOK[2].name
    edited.write_text(edited.read_text() + "\n\n## Parking\n\nVisitors park on level two of the garage.\n")
    (docs / HANDBOOK[5].name).unlink()
    (docs / "zz-new.md").write_text("# Bicycle storage\n\nBicycles are stored in the basement cage.\n")
    kept = sum(n for name, n in first.manifest["file_chunks"].items()
               if name not in (HANDBOOK[2].name, HANDBOOK[5].name))
    spy = SpyEmbedder(embedder)
    incremental = KnowledgeBase.build(docs, index, spy)
    changed_chunks = incremental.manifest["file_chunks"][HANDBOOK[2].name] + 1
    assert incremental.changes.line() == f"1 added, 1 changed, 1 removed; {kept} chunks kept"
    assert spy.calls[0] == changed_chunks == incremental.manifest["embedded_chunks"]  # only those chunks embedded
    assert len(spy.calls) == 2 and spy.calls[1] < len(incremental.vocabulary)  # then only the new terms
    full = KnowledgeBase.build(docs, tmp_path / "full", embedder, force=True)
    assert full.changes.rebuild == "asked to rebuild (force)"
    _same_index(incremental, full, _questions(full))
    _same_index(KnowledgeBase.load(index, embedder), full, _questions(full))  # as saved, too


def test_nothing_changed_reads_and_embeds_nothing_and_a_deletion_embeds_no_chunk(tmp_path, embedder, monkeypatch):
    docs, index = _corpus(tmp_path / "docs"), tmp_path / "index"
    first = KnowledgeBase.build(docs, index, embedder)
    read = []
    real = building.read_documents
    monkeypatch.setattr("program.retrieval.building.read_documents",
                        lambda root, names, **kw: read.append(list(names)) or real(root, names, **kw))
    spy = SpyEmbedder(embedder)
    again = KnowledgeBase.build(docs, index, spy)
    assert again.changes.line() == f"nothing changed; {len(first)} chunks kept" and spy.calls == [] and read == []
    assert again.manifest["created"] == first.manifest["created"]  # not written again
    (docs / "notes.txt").unlink()
    after = KnowledgeBase.build(docs, index, spy)
    assert read == [[]] and spy.calls == []  # no file read, no chunk or term embedded
    assert after.changes.line() == f"1 removed; {len(first) - 1} chunks kept"
    _same_index(after, KnowledgeBase.build(docs, tmp_path / "full", embedder), _questions(after))


def test_an_added_document_id_that_another_file_holds_is_refused_and_the_index_kept(tmp_path, embedder):
    from program.retrieval import CorpusError

    docs, index = _corpus(tmp_path / "docs"), tmp_path / "index"
    first = KnowledgeBase.build(docs, index, embedder)
    (docs / "more.jsonl").write_text(json.dumps({"id": "faq-1", "text": "Another page with that id."}) + "\n")
    with pytest.raises(CorpusError, match=r"duplicate document id 'faq-1' at .*more\.jsonl \(first seen at "
                                          r".*faq\.jsonl\)"):
        KnowledgeBase.build(docs, index, embedder)
    assert KnowledgeBase.load(index).manifest["created"] == first.manifest["created"]


def test_other_chunking_or_another_embedder_builds_everything_again_saying_why(tmp_path, embedder):
    docs, index = _corpus(tmp_path / "docs"), tmp_path / "index"
    first = KnowledgeBase.build(docs, index, embedder)
    spy = SpyEmbedder(embedder)
    smaller = KnowledgeBase.build(docs, index, spy, target_tokens=120)
    assert smaller.changes.line().startswith("rebuilt: the chunking changed (target_tokens 200 -> 120")
    assert spy.calls[0] == len(smaller) != len(first)
    spy = SpyEmbedder(embedder)
    spy.name = "another-model"
    other = KnowledgeBase.build(docs, index, spy, target_tokens=120)
    assert other.changes.line() == ("rebuilt: the embedder changed (model 'sentence-transformers/all-MiniLM-L6-v2' "
                                    "-> 'another-model')")
    assert spy.calls[0] == len(other)
    with pytest.raises(Exception, match="was built with 'another-model'"):  # a question must be embedded alike
        KnowledgeBase.build(docs, index, embedder, target_tokens=120, other_embedder="refuse")


def test_an_unreadable_file_stays_left_out_unread_while_it_is_unchanged(tmp_path, embedder, monkeypatch):
    docs, index = _corpus(tmp_path / "docs"), tmp_path / "index"
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4\nthis is no PDF at all\n")
    first = KnowledgeBase.build(docs, index, embedder)
    assert list(first.manifest["unreadable_files"]) == ["broken.pdf"]
    read = []
    real = building.read_documents
    monkeypatch.setattr("program.retrieval.building.read_documents",
                        lambda root, names, **kw: read.append(list(names)) or real(root, names, **kw))
    (docs / "notes.txt").write_text("The cafeteria opens at nine now.\n")
    second = KnowledgeBase.build(docs, index, embedder)
    assert read == [["notes.txt"]]  # the broken PDF was not converted again
    assert second.manifest["unreadable"] == first.manifest["unreadable"] and "broken.pdf" in \
        second.manifest["unreadable"][0]


def test_a_reader_never_puts_back_the_old_index_of_a_writer_still_swapping(tmp_path):
    """``serve`` polls for new builds while ``index`` swaps one in: between the writer's two renames
    there is no index folder; a reader that put the old one back then made the writer drop its
    build. Only a dead writer's old index is put back."""
    import os

    from program.retrieval.interrupted import recover_interrupted_write

    index = tmp_path / "index"
    old = tmp_path / f".index.old-{os.getpid()}-123"  # this process: a writer still running
    old.mkdir()
    (old / "manifest.json").write_text("{}")
    recover_interrupted_write(index)
    assert not index.exists() and old.exists()
    dead = tmp_path / ".index.old-999999999-124"  # no such process: its writer was killed
    old.rename(dead)
    recover_interrupted_write(index)
    assert (index / "manifest.json").is_file() and not dead.exists()
