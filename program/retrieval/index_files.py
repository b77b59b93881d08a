"""A faiss knowledge base's folder: its files, and writing them all or nothing.

``index.faiss`` (the vectors), ``chunks.jsonl`` (row i = vector i), ``manifest.json`` (format,
embedder, chunking, files and their hashes, chunks per file, what the build changed),
``vocabulary.*`` (:mod:`program.retrieval.vocabulary`) and ``lexical/`` (BM25,
:mod:`program.retrieval.lexical`). :func:`write_atomic` fills a temporary folder beside the index
folder and swaps it in, so a crash never leaves a half-written index: a writer killed between the
two renames leaves the previous index beside the folder, and the next ``load`` or ``build`` puts
it back (:func:`program.retrieval.interrupted.recover_interrupted_write`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import faiss

from program.retrieval.base import KnowledgeBaseError
from program.retrieval.chunking import Chunk
from program.retrieval.lexical import LexicalIndex
from program.retrieval.vocabulary import Vocabulary
from program.retrieval.vocabulary_files import save_vocabulary

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
INDEX_FILE, CHUNKS_FILE, MANIFEST_FILE = "index.faiss", "chunks.jsonl", "manifest.json"


def vocabulary_stamp(manifest: dict) -> dict:
    """What ties a saved vocabulary to its index: model, dimensions, chunk count, build time."""
    embedding = manifest.get("embedding") or {}
    return {"model": embedding.get("model"), "dimensions": embedding.get("dimensions"),
            "chunk_count": manifest.get("chunk_count"), "created": manifest.get("created")}


def _write_files(folder: Path, index, chunks: list[Chunk], manifest: dict, vocabulary: Vocabulary | None,
                 lexical: LexicalIndex | None = None) -> None:
    """Write and sync the index's files into ``folder``. Raises OSError or faiss's RuntimeError."""
    faiss.write_index(index, str(folder / INDEX_FILE))
    with open(folder / CHUNKS_FILE, "w", encoding="utf-8") as f:
        for c in chunks:
            f.write(json.dumps(asdict(c), ensure_ascii=False) + "\n")
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    if vocabulary is not None:
        save_vocabulary(vocabulary, folder, vocabulary_stamp(manifest))
    if lexical is not None:
        lexical.save(folder, vocabulary_stamp(manifest))
    for name in (INDEX_FILE, CHUNKS_FILE, MANIFEST_FILE):
        with open(folder / name, "rb") as f:
            os.fsync(f.fileno())


def write_atomic(index_dir: Path, index, chunks: list[Chunk], manifest: dict,
                 vocabulary: Vocabulary | None = None, lexical: LexicalIndex | None = None) -> None:
    """Write the three files (and the vocabulary's and the lexical index, when given) into a temp
    folder beside ``index_dir``, then swap it into place. A kill leaves the previous index, or
    (between the two renames) the previous index beside it, which ``recover_interrupted_write``
    puts back. Raises ``KnowledgeBaseError`` (one line: a full disk, a read-only folder) with the
    previous index untouched."""
    try:
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.tmp-{os.getpid()}-", dir=index_dir.parent))
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot write the index into {index_dir}: {exc.strerror or exc}") from None
    try:
        _write_files(tmp, index, chunks, manifest, vocabulary, lexical)
    except (OSError, RuntimeError) as exc:  # faiss reports a failed write (a full disk) as RuntimeError
        shutil.rmtree(tmp, ignore_errors=True)
        # faiss: "... write error in PATH: 16339 != 29184 (No space left on device)"
        found = re.search(r"\(([^()]+)\)\s*$", str(exc))
        reason = getattr(exc, "strerror", None) or (found.group(1) if found else str(exc).strip().splitlines()[-1])
        raise KnowledgeBaseError(f"cannot write the index into {index_dir}: {reason}; "
                                 "the previous index is unchanged") from None
    try:
        old = None
        if index_dir.exists():
            old = index_dir.parent / f".{index_dir.name}.old-{os.getpid()}-{time.time_ns()}"
            os.replace(index_dir, old)
        try:
            os.replace(tmp, index_dir)
        except OSError:  # another process put an index in place meanwhile: keep theirs
            log.warning("index %s appeared during build; keeping the other writer's copy", index_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = ["CHUNKS_FILE", "FORMAT_VERSION", "INDEX_FILE", "MANIFEST_FILE", "vocabulary_stamp", "write_atomic"]
