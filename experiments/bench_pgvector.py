"""The pgvector knowledge base as a benchmark index: built through the program's ingestion
path from given vectors, searched like a faiss index (``search(vectors, k) -> (scores, ids)``),
or searched as the program searches it, hybrid included (``.kb.search``)."""

from __future__ import annotations

import time

import numpy as np

from program.retrieval.chunking import Chunk
from program.retrieval.postgres import PgVectorKnowledgeBase, postings as lexical_postings, schema
from program.retrieval.postgres.connection import Database
from program.retrieval.postgres.ingest import (CHUNK_COLUMNS, COPY_TYPES, chunking_key, copy_rows, publish_file,
                                               staged_row)
from program.retrieval.postgres.url import DatabaseURL

SOURCE_FILE = "synthetic.jsonl"


class PgVectorIndex:
    """A filled pgvector knowledge base answering ``search`` with faiss's shapes: row ids are
    the ``j`` of chunk ids ``syn-<j>#0``. ``lexicon_seconds``: the time :func:`build_pgvector`
    took to count the BM25 lexicon and vacuum the postings."""

    def __init__(self, kb: PgVectorKnowledgeBase, lexicon_seconds: float = 0.0):
        self.kb, self.lexicon_seconds = kb, lexicon_seconds

    def search(self, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` per row of ``vectors`` (shape ``(q, d)``): scores and ids, each ``(q, k)``."""
        scores, ids = np.full((len(vectors), k), -1.0, np.float32), np.full((len(vectors), k), -1, np.int64)
        for i, v in enumerate(vectors):
            for j, p in enumerate(self.kb.search_vector(v, k)):
                scores[i, j], ids[i, j] = p.score, int(p.id[4:].split("#")[0])
        return scores, ids

    def close(self) -> None:
        self.kb.close()


def create_tables(db: Database, embedder, hnsw: dict) -> dict:
    """Create a benchmark knowledge base's tables in ``db``'s table (embedder ``embedder``'s model
    and dimensions, HNSW ``hnsw``) and its lexical postings; its tables' names by role."""
    meta = {"format_version": schema.FORMAT_VERSION, "backend": "pgvector",
            "embedding": {"model": embedder.name, "dimensions": embedder.dimensions}, "chunking": {"bench": True},
            "index": {"type": "hnsw", "metric": "cosine", "opclass": "vector_cosine_ops", **hnsw},
            "source_path": "synthetic", "created": "", "generation": 0}
    db.run(lambda c: schema.create(c, db.url.table, embedder.dimensions, hnsw, meta), what="create tables")
    db.run(lambda c: lexical_postings.ensure(c, db.url.table), what="create the lexical postings")
    db.renew()  # the new connections know the vector type the extension just made
    return schema.names(db.url.table)


def build_pgvector(url: str, chunks: list[Chunk], vectors: np.ndarray, embedder, hnsw: dict,
                   batch_size: int = 256) -> tuple[PgVectorIndex, float]:
    """A new knowledge base at ``url`` (its table must not exist) holding ``chunks`` with
    ``vectors`` (shape ``(len(chunks), d)``) as one corpus file: staged in batches of
    ``batch_size``, then published in one transaction into the HNSW-indexed table.

    As the program's index run does (:mod:`program.retrieval.postgres.ingest`), publishing
    writes the chunks' BM25 postings in the same transaction; the lexicon is counted after, and
    the postings vacuumed.

    Returns:
        The index and the seconds the writes took, the lexicon count and vacuum included (tables created
        beforehand, not counted).
    """
    db = Database(DatabaseURL.parse(url), max_size=2)
    table, key, sha = db.url.table, chunking_key({"bench": True}), "synthetic"
    names = create_tables(db, embedder, hnsw)
    t0 = time.perf_counter()
    for start in range(0, len(chunks), batch_size):
        rows = [staged_row(sha, key, SOURCE_FILE, i, c, vectors[i])
                for i, c in enumerate(chunks[start:start + batch_size], start)]
        db.run(lambda conn: copy_rows(conn, names["staging"], ["file_sha256", "chunking"] + CHUNK_COLUMNS,
                                  ["text", "text"] + COPY_TYPES, rows), what="stage")
    db.run(lambda c: publish_file(c, table, SOURCE_FILE, sha, key, len(chunks), len(chunks)), what="publish")
    t1 = time.perf_counter()
    db.run(lambda c: lexical_postings.refresh(c, table), what="count the lexicon")
    with db.connection() as conn:  # as the index run ends: the postings vacuumed, outside a transaction
        conn.autocommit = True
        lexical_postings.vacuum(conn, table)
    t2 = time.perf_counter()
    seconds, lexicon = t2 - t0, t2 - t1
    db.close()
    return PgVectorIndex(PgVectorKnowledgeBase.connect(url, embedder), lexicon), seconds
