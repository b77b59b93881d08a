"""What every knowledge base shares, whatever stores it: its errors, the string embedded for a
chunk, and the hash and modification time its manifest records per corpus file (faiss in ``index.py``, PostgreSQL in
``postgres/``)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from pathlib import Path

from program.retrieval.chunking import Chunk


class KnowledgeBaseError(RuntimeError):
    """A saved index is unusable (inconsistent files, wrong model, unreadable)."""


class IndexNotFoundError(KnowledgeBaseError, FileNotFoundError):
    """No saved index at the given folder."""


def embed_text(chunk: Chunk) -> str:
    """The string embedded for ``chunk``: title, heading (if distinct) and text, one per line."""
    parts = [chunk.title]
    if chunk.heading and chunk.heading != chunk.title:
        parts.append(chunk.heading)
    return "\n".join([p for p in parts if p] + [chunk.text])


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, 64 hex digits: what the manifest records per corpus file."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def modified_times(source_path: Path, names) -> dict[str, str]:
    """Corpus file -> its modification time (UTC, ISO 8601), for the files ``names`` that can be
    read now: what date filters read (``program.retrieval.filters``)."""
    out = {}
    for name in names:
        path = source_path if source_path.is_file() else source_path / name
        try:
            out[name] = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="seconds")
        except OSError:
            continue
    return out
