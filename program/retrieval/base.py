"""What every knowledge base shares, whatever stores it: its errors, the string embedded for a
chunk, and the hash its manifest records per corpus file (faiss in ``index.py``, PostgreSQL in
``postgres/``)."""

from __future__ import annotations

import hashlib
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
