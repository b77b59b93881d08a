"""Building a faiss knowledge base: only what changed since the last build, ending as a full build would.

:func:`build_knowledge_base` (``KnowledgeBase.build``) hashes the corpus files and compares them
with the saved manifest (:mod:`program.retrieval.changes`):

* nothing changed: the saved index is used as it is (re-indexed from its stored vectors when only
  the faiss index type differs);
* files added, changed or removed: only the added and changed files are read, converted, chunked
  and embedded; the unchanged files keep their chunks and stored vectors, the removed and changed
  files' chunks are dropped. Chunks stay in corpus-file order, so the chunk ids, their positions
  and the vectors (within float tolerance) are those a full build gives; the vocabulary is
  collected again over every chunk, embedding only the terms it did not hold before, and the
  BM25 index is rebuilt (seconds);
* another embedder, other chunking parameters, another format or corpus path: every file is read
  and embedded again, and the reason is kept.

Whatever happened is :class:`~program.retrieval.changes.CorpusChanges`, in ``kb.changes`` and in
the manifest's ``changes`` entry. The new build is written beside the old one and swapped in
(:func:`program.retrieval.index_files.write_atomic`): a killed build leaves the previous index.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from program.retrieval.base import KnowledgeBaseError, embed_text, file_sha256, modified_times
from program.retrieval.changes import FILE_CHUNKS, FILE_MODIFIED, UNREADABLE_FILES, CorpusChanges, compare
from program.retrieval.chunking import chunk_document, chunking_params
from program.retrieval.corpus import (CorpusError, check_document_ids, empty_corpus, list_source_files,
                                      read_documents)
from program.retrieval.embedder_choice import embedding_mismatch
from program.retrieval.embedding import get_embedder
from program.retrieval.faiss_index import IndexSpec, build_index, stored_vectors
from program.retrieval.index_files import FORMAT_VERSION, MANIFEST_FILE, write_atomic
from program.retrieval.interrupted import recover_interrupted_write
from program.retrieval.lexical import PARAMS as LEXICAL_PARAMS, LexicalIndex
from program.retrieval.progress import BuildProgress
from program.retrieval.vocabulary import build_vocabulary

log = logging.getLogger(__name__)


def fingerprint(source_path: Path) -> dict[str, str]:
    """Corpus file (relative name; the file's name for a single file) -> sha256, in sorted order.

    Raises:
        CorpusError: a file cannot be read (one line naming it)."""
    files, _ = list_source_files(source_path)
    out = {}
    for f in files:
        try:
            digest = file_sha256(f)
        except OSError as exc:
            raise CorpusError(f"cannot read {f}: {exc.strerror or exc}") from None
        out[f.name if source_path.is_file() else f.relative_to(source_path).as_posix()] = digest
    return out


def _previous(cls, index_dir: Path):
    """The saved knowledge base at ``index_dir`` (its embedder not checked: ``compare`` says why
    another one rebuilds), or None when there is none or it is unusable (said in the log)."""
    if not (index_dir / MANIFEST_FILE).is_file():
        return None
    try:
        return cls.load(index_dir)
    except KnowledgeBaseError as exc:
        log.warning("cannot build on index %s (%s); rebuilding", index_dir, exc)
        return None


def build_knowledge_base(cls, source_path, index_dir, embedder=None, *, target_tokens: int = 200,
                         max_tokens: int = 300, overlap_tokens: int = 30, force: bool = False, index="flat",
                         with_vocabulary: bool = True, progress: bool | None = None, other_embedder: str = "rebuild"):
    """``KnowledgeBase.build``: see its docstring and this module's."""
    # absolute, symlinks kept: a corpus file linked as kb.jsonl keeps its name and type
    source, index_dir = Path(os.path.abspath(source_path)), Path(index_dir).resolve()
    emb = embedder or get_embedder()
    chunking = chunking_params(target_tokens, max_tokens, overlap_tokens)
    spec = IndexSpec.coerce(index)
    recover_interrupted_write(index_dir)
    previous = None if force else _previous(cls, index_dir)
    if previous is not None and other_embedder == "refuse":
        # names first: a served embedder of another name is not asked for its dimension
        if why := embedding_mismatch(previous.manifest.get("embedding"), emb):
            raise KnowledgeBaseError(f"the index of {source} at {index_dir} was {why}; ask with the embedder that "
                                     f"built it (--embedder), or index it again: python -m program index {source} "
                                     "--embedder ...")
    expected = {"format_version": FORMAT_VERSION, "files": fingerprint(source), "chunking": chunking,
                "embedding": {"model": emb.name, "dimensions": emb.dimensions}}
    changes = compare(previous.manifest if previous else None, expected, str(source))
    if force:
        changes = CorpusChanges(added=tuple(expected["files"]), rebuild="asked to rebuild (force)")
    if changes.none:
        previous = previous.reused(emb, changes)
        if IndexSpec.from_manifest(previous.manifest.get("index")) != spec:
            return previous._reindex(spec, changes)
        log.info("reusing index %s (%d chunks)", index_dir, len(previous))
        return previous
    if changes.rebuild:
        log.info("index %s: %s", index_dir, changes.line())
        previous = None
    return _build(cls, source, index_dir, emb, expected, spec, changes, previous, with_vocabulary,
                  (target_tokens, max_tokens, overlap_tokens), BuildProgress(progress))


@dataclass
class _Assembled:
    """The new build's chunks and vectors in corpus-file order, and what it read."""

    chunks: list = field(default_factory=list)
    vectors: list = field(default_factory=list)
    per_file: dict[str, int] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    embedded: int = 0


def _kept(previous, changes: CorpusChanges) -> dict[str, tuple[list, np.ndarray]]:
    """The unchanged files of ``previous``: file -> (its chunks, their stored vectors)."""
    if previous is None:
        return {}
    vectors = stored_vectors(previous._index)
    kept, start = {}, 0
    for name, count in previous.manifest[FILE_CHUNKS].items():
        if name in changes.unchanged:
            kept[name] = (previous.chunks[start:start + count], vectors[start:start + count])
        start += count
    return kept


def _read_and_embed(source: Path, names, emb, sizes: tuple[int, int, int], bars: BuildProgress):
    """``(file -> (chunks, vectors), file -> why unreadable, empty documents)`` for the files
    ``names``: read, converted, chunked and embedded (one ``encode`` over all their chunks).

    Raises:
        KnowledgeBaseError: the embedder returned vectors of another shape."""
    report: dict = {}
    per_file = read_documents(source, names, report=report, progress=bars.file_read, page_progress=bars.page_read)
    chunked = {name: [c for d in docs for c in chunk_document(d, *sizes)] for name, docs in per_file.items()}
    chunks = [c for name in sorted(chunked) for c in chunked[name]]
    vectors = (bars.embedder(emb, "chunks").encode([embed_text(c) for c in chunks]) if chunks
               else np.zeros((0, emb.dimensions), np.float32))  # a file removed: nothing to embed, nothing loaded
    if vectors.shape != (len(chunks), emb.dimensions):
        raise KnowledgeBaseError(f"embedder returned shape {vectors.shape}, expected {(len(chunks), emb.dimensions)}")
    out, start = {}, 0
    for name in sorted(chunked):
        out[name] = (chunked[name], vectors[start:start + len(chunked[name])])
        start += len(chunked[name])
    return out, report.get("unreadable_files", {}), report.get("empty_documents", 0)


def _assemble(source: Path, files: dict, changes: CorpusChanges, previous, emb, sizes, bars) -> _Assembled:
    """The unchanged files' chunks and vectors kept, the rest read and embedded, in corpus-file order.

    Raises:
        CorpusError: no chunk at all, or a document id found twice."""
    kept = _kept(previous, changes)
    fresh, unreadable, empty = _read_and_embed(source, changes.to_read, emb, sizes, bars)
    before = (previous.manifest.get(UNREADABLE_FILES) or {}) if previous is not None else {}
    out = _Assembled(unreadable={**{n: why for n, why in before.items() if n in changes.unchanged}, **unreadable},
                     embedded=sum(len(c) for c, _ in fresh.values()))
    for name in files:  # corpus-file order, as a full build writes them
        if name in out.unreadable:
            continue
        chunks, vectors = kept.get(name) or fresh.get(name) or ([], [])
        out.chunks += chunks
        out.vectors += list(vectors)
        out.per_file[name] = len(chunks)
    if not out.chunks:
        raise empty_corpus(source, len(files), list_source_files(source)[1], list(out.unreadable.values()), empty)
    check_document_ids(out.chunks)
    return out


def _build(cls, source: Path, index_dir: Path, emb, expected: dict, spec: IndexSpec, changes: CorpusChanges,
           previous, with_vocabulary: bool, sizes: tuple[int, int, int], bars: BuildProgress):
    """Assemble the new build (``_assemble``), index, collect its vocabulary, write it, return it."""
    t0 = time.perf_counter()
    built = _assemble(source, expected["files"], changes, previous, emb, sizes, bars)
    chunks = built.chunks
    matrix = np.ascontiguousarray(np.stack(built.vectors), dtype=np.float32)
    known = previous.vocabulary.known() if previous is not None and with_vocabulary else None
    vocabulary = build_vocabulary(chunks, matrix, bars.embedder(emb, "terms"), known=known) if with_vocabulary else None
    lexical = LexicalIndex.build([embed_text(c) for c in chunks])
    faiss_index = build_index(spec, matrix)
    manifest = {**expected, "index": spec.to_manifest(), "lexical": {"library": "bm25s", **LEXICAL_PARAMS},
                "source_path": str(source), "documents": len({c.doc_id for c in chunks}), "chunk_count": len(chunks),
                FILE_CHUNKS: built.per_file, FILE_MODIFIED: modified_times(source, built.per_file),
                UNREADABLE_FILES: built.unreadable,
                "skipped_files": [str(s) for s in list_source_files(source)[1]],
                "unreadable": list(built.unreadable.values()), "changes": changes.to_dict(),
                "embedded_chunks": built.embedded, "build_seconds": round(time.perf_counter() - t0, 3),
                "created": datetime.now(timezone.utc).isoformat(timespec="microseconds")}
    write_atomic(index_dir, faiss_index, chunks, manifest, vocabulary, lexical)
    log.info("built %s index %s: %s (%d chunks embedded) in %.1fs", spec.type, index_dir, changes.line(),
             built.embedded, manifest["build_seconds"])
    return cls(faiss_index, chunks, manifest, index_dir, emb, vocabulary, lexical, changes)


__all__ = ["build_knowledge_base", "fingerprint"]
