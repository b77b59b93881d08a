"""Index a corpus into a pgvector knowledge base: only what changed, published file by file.

One run (:func:`index_corpus`), under a session advisory lock so that two indexers of the same
table take turns:

1. hash every corpus file (sha256); a file whose hash and chunking match ``T_files`` is
   unchanged and costs nothing (an unchanged corpus embeds nothing);
2. for each changed or new file: chunk it as the faiss backend does, embed the chunks in
   batches of ``batch_size`` and write each batch into ``T_staging`` in its own transaction.
   A chunk whose embedded text is unchanged from the live version keeps its stored vector;
   a chunk staged by an earlier, interrupted run of the same file version is not embedded again;
3. publish the file in one transaction: delete its live chunks (and their postings), move its
   staged chunks in, write their BM25 postings, record its new hash in ``T_files``, bump the
   generation. A reader's query runs in one
   snapshot, so it sees the file's old chunks or its new ones, never a mix; a run killed
   before this step leaves the old version live and searchable;
4. delete the chunks of files that left the corpus (one transaction each);
5. rebuild the vocabulary (``T_terms``) when the generation moved, in one transaction;
6. recount the BM25 statistics (``T_lexicon``, :mod:`program.retrieval.postgres.postings`)
   when the generation moved, in one transaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from psycopg import sql

from program.retrieval.chunking import Chunk, chunk_document
from program.retrieval.corpus import list_source_files, load_documents
from program.retrieval.base import KnowledgeBaseError, embed_text, file_sha256, modified_times
from program.retrieval.postgres import postings, schema
from program.retrieval.postgres.schema import check_meta
from program.retrieval.vocabulary import DEFAULT_PARAMS, build_vocabulary

log = logging.getLogger(__name__)

CHUNK_COLUMNS = ["source_file", "position", "chunk_id", "doc_id", "text", "title", "url", "heading",
                 "source_path", "page", "embedding"]
COPY_TYPES = ["text", "int4", "text", "text", "text", "text", "text", "text", "text", "int4", "vector"]


@dataclass
class IngestReport:
    """What one index run did.

    Attributes:
        files: corpus files seen; unchanged: of them, skipped (hash and chunking as live).
        published: files whose new version went live; removed: files deleted from the table.
        embedded: chunks embedded (0 for an unchanged corpus); reused: chunks that kept a
            stored vector (unchanged text, or staged by an interrupted run).
        chunks: live chunks after the run; seconds: wall time.
    """

    files: int = 0
    unchanged: int = 0
    published: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    embedded: int = 0
    reused: int = 0
    chunks: int = 0
    seconds: float = 0.0


def as_array(vector) -> np.ndarray:
    """A stored ``vector`` value (pgvector's ``Vector``, or an array) as float32 numpy, shape ``(d,)``."""
    return np.asarray(vector.to_numpy() if hasattr(vector, "to_numpy") else vector, dtype=np.float32)


def chunking_key(chunking: dict) -> str:
    """16 hex digits identifying chunking parameters (stored per file and per staged chunk)."""
    return hashlib.sha256(json.dumps(chunking, sort_keys=True).encode()).hexdigest()[:16]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _new_manifest(source: Path, embedder, chunking: dict, params: dict) -> dict:
    """The manifest a new table starts with: format, embedding model, chunking, HNSW ``params``, source."""
    return {"format_version": schema.FORMAT_VERSION, "backend": "pgvector",
            "embedding": {"model": embedder.name, "dimensions": embedder.dimensions}, "chunking": chunking,
            "index": {"type": "hnsw", "metric": "cosine", "opclass": "vector_cosine_ops", **params},
            "source_path": str(source), "created": _now(), "generation": 0}


def _open_table(db, table: str, source: Path, embedder, chunking: dict, params: dict, requested: dict,
                meta: dict) -> None:
    """Create the tables if missing, check the manifest and HNSW build, record this ingest's chunking, source, index."""
    db.run(lambda c: schema.create(c, table, embedder.dimensions, params, meta), what="create tables")
    db.run(lambda c: postings.ensure(c, table), what="create the lexical postings")
    db.renew()  # connections opened before CREATE EXTENSION lack the vector type
    meta = db.run(lambda c: schema.read_meta(c, table), what="read manifest")
    check_meta(meta, embedder, db.url)
    built = db.run(lambda c: schema.hnsw_parameters(c, table), what="read index parameters")
    clash = {k: v for k, v in requested.items() if k in built and built[k] != v}
    if clash:
        raise KnowledgeBaseError(f"the HNSW index of {db.url} was built with {built}, not {clash}; "
                                 f"index into a new table for other build parameters")
    index = {**meta["index"], **built, **{k: v for k, v in requested.items() if k == "ef_search"}}
    db.run(lambda c: schema.update_meta(c, table, {"chunking": chunking, "source_path": str(source),
                                                   "index": index}), what="update manifest")


def _live_files(db, table: str) -> dict[str, tuple[str, str]]:
    """Source file -> ``(sha256, chunking key)`` of every file published in ``table``."""
    return db.run(lambda c: dict(((f, (s, k)) for f, s, k in c.execute(
        sql.SQL("SELECT source_file, sha256, chunking FROM {t}").format(t=schema.names(table)["files"])))),
        what="read files")


def _publish_files(db, table: str, source: Path, todo: list[str], rel: dict[str, str], hashes: dict[str, str],
                   key: str, chunking: dict, embedder, batch_size: int, report: IngestReport) -> None:
    """Chunk, embed, stage and publish each file of ``todo`` in turn, recording it in ``report``."""
    docs = load_documents(source)
    by_file: dict[str, list] = {}
    for d in docs:
        by_file.setdefault(rel.get(d.source_path, d.source_path), []).append(d)
    db.run(lambda c: _clear_stale_staging(c, table, {f: hashes[f] for f in todo}, key), what="clear staging")
    for f in todo:
        chunks = [c for d in by_file.get(f, []) for c in chunk_document(
            d, chunking["target_tokens"], chunking["max_tokens"], chunking["overlap_tokens"])]
        _stage_file(db, table, f, hashes[f], key, chunks, embedder, batch_size, report)
        modified = modified_times(source, [f]).get(f)
        db.run(lambda c: publish_file(c, table, f, hashes[f], key, len(chunks), len(by_file.get(f, [])), modified),
               what=f"publish {f}")
        report.published.append(f)
        log.info("published %s: %d chunks", f, len(chunks))


def index_corpus(db, table: str, source: Path, embedder, chunking: dict, index_params: dict | None = None, *,
                 batch_size: int = 256, with_vocabulary: bool = True) -> IngestReport:
    """Bring ``table`` in line with the corpus at ``source`` (see the module docstring).

    Args:
        db: a :class:`~program.retrieval.postgres.connection.Database`.
        table: the chunks table (schema in :mod:`program.retrieval.postgres.schema`).
        source: corpus file or folder (resolved).
        embedder: ``encode(list[str]) -> (n, d)`` float32, with ``name`` and ``dimensions``.
        chunking: ``target_tokens``, ``max_tokens``, ``overlap_tokens`` (+ descriptive keys).
        index_params: HNSW ``m``, ``ef_construction``, ``ef_search`` (any of them; the rest
            from ``schema.HNSW_DEFAULTS`` for a new table, unchanged for an existing one).
            ``ef_search`` is a query-time setting and may change; ``m`` and ``ef_construction``
            are fixed when the table is created.
        batch_size: chunks embedded and written per transaction.
        with_vocabulary: rebuild the vocabulary when anything changed.

    Raises:
        CorpusError: the corpus is missing, malformed or empty.
        KnowledgeBaseError: the table holds another embedding model or dimension, or another
            format, or its HNSW index was built with other ``m`` / ``ef_construction``.
        KnowledgeBaseUnavailable: the server cannot be reached.
    """
    t0 = time.perf_counter()
    files, _ = list_source_files(source)
    rel = {str(f): (f.name if source.is_file() else f.relative_to(source).as_posix()) for f in files}
    hashes = {rel[str(f)]: file_sha256(f) for f in files}
    key = chunking_key(chunking)
    requested = dict(index_params or {})
    params = {**schema.HNSW_DEFAULTS, **requested}
    meta = _new_manifest(source, embedder, chunking, params)
    report = IngestReport(files=len(files))
    with db.connection() as lock_conn:
        lock_conn.autocommit = True
        lock_conn.execute("SELECT pg_advisory_lock(hashtext(%s))", [f"crag-kb-ingest:{table}"])
        try:
            _open_table(db, table, source, embedder, chunking, params, requested, meta)
            live = _live_files(db, table)
            todo = sorted(f for f, h in hashes.items() if live.get(f) != (h, key))
            gone = sorted(set(live) - set(hashes))
            report.unchanged = len(files) - len(todo)
            if todo:
                _publish_files(db, table, source, todo, rel, hashes, key, chunking, embedder, batch_size, report)
            for f in gone:
                db.run(lambda c: _remove(c, table, f), what=f"remove {f}")
                report.removed.append(f)
            if with_vocabulary:
                _refresh_vocabulary(db, table, embedder)
            db.run(lambda c: postings.refresh(c, table), what="count the lexicon")
            if todo or gone:
                postings.vacuum(lock_conn, table)
        finally:
            lock_conn.execute("SELECT pg_advisory_unlock(hashtext(%s))", [f"crag-kb-ingest:{table}"])
    report.chunks = db.run(lambda c: c.execute(sql.SQL("SELECT count(*) FROM {t}").format(
        t=schema.names(table)["chunks"])).fetchone()[0], what="count chunks")
    report.seconds = round(time.perf_counter() - t0, 3)
    return report


def _clear_stale_staging(conn, table: str, todo: dict[str, str], key: str) -> None:
    """Drop staged chunks of file versions this run will not publish (older interrupted runs)."""
    t = schema.names(table)["staging"]
    conn.execute(sql.SQL("DELETE FROM {t} WHERE NOT (source_file = ANY(%s) AND chunking = %s "
                         "AND file_sha256 = (%s::jsonb ->> source_file))").format(t=t),
                 [list(todo), key, json.dumps(todo)])


def _stage_file(db, table: str, f: str, sha: str, key: str, chunks: list[Chunk], embedder, batch_size: int,
                report: IngestReport) -> None:
    """Write every chunk of file ``f`` (version ``sha``) into staging, embedding only those
    neither staged already nor live with the same embedded text."""
    n = schema.names(table)

    def known(conn):
        staged = {r[0] for r in conn.execute(sql.SQL(
            "SELECT chunk_id FROM {t} WHERE source_file = %s AND file_sha256 = %s AND chunking = %s").format(
            t=n["staging"]), [f, sha, key])}
        live = {(r[0], embed_text(Chunk(r[0], "", r[1], r[2], heading=r[3]))): r[4] for r in conn.execute(
            sql.SQL("SELECT chunk_id, text, title, heading, embedding FROM {t} WHERE source_file = %s").format(
                t=n["chunks"]), [f])}
        return staged, live

    staged, live = db.run(known, what=f"read staged chunks of {f}")
    pending = [(i, c) for i, c in enumerate(chunks) if c.chunk_id not in staged]
    report.reused += len(chunks) - len(pending)
    for start in range(0, len(pending), batch_size):
        batch = pending[start:start + batch_size]
        texts = [embed_text(c) for _, c in batch]
        vectors: list = [live.get((c.chunk_id, t)) for (_, c), t in zip(batch, texts)]
        missing = [j for j, v in enumerate(vectors) if v is None]
        if missing:
            fresh = np.asarray(embedder.encode([texts[j] for j in missing]), dtype=np.float32)
            if fresh.shape != (len(missing), embedder.dimensions):
                raise ValueError(f"embedder returned shape {fresh.shape}, "
                                 f"expected {(len(missing), embedder.dimensions)}")
            for j, v in zip(missing, fresh):
                vectors[j] = v
        report.embedded += len(missing)
        report.reused += len(batch) - len(missing)
        rows = [staged_row(sha, key, f, i, c, as_array(v)) for (i, c), v in zip(batch, vectors)]
        db.run(lambda conn: copy_rows(conn, n["staging"], ["file_sha256", "chunking"] + CHUNK_COLUMNS,
                                  ["text", "text"] + COPY_TYPES, rows), what=f"stage chunks of {f}")


def staged_row(sha: str, key: str, f: str, position: int, chunk: Chunk, vector: np.ndarray) -> list:
    """One staging row of chunk ``chunk`` (``position`` in file ``f``, version ``sha``, chunking
    ``key``), in the column order of ``["file_sha256", "chunking"] + CHUNK_COLUMNS``."""
    return [sha, key, f, position, chunk.chunk_id, chunk.doc_id, chunk.text, chunk.title, chunk.url, chunk.heading,
            chunk.source_path, chunk.page, vector]


def copy_rows(conn, table: sql.Identifier, columns: list[str], types: list[str], rows: list[list]) -> None:
    """``COPY`` ``rows`` (lists in ``columns`` order, vectors as float32 arrays) into ``table``
    in binary format; ``types`` are the PostgreSQL type names of the columns."""
    with conn.cursor().copy(sql.SQL("COPY {t} ({c}) FROM STDIN WITH (FORMAT BINARY)").format(
            t=table, c=sql.SQL(", ").join(map(sql.Identifier, columns)))) as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)


def publish_file(conn, table: str, f: str, sha: str, key: str, count: int, documents: int,
                 modified: str | None = None) -> None:
    """Swap file ``f``'s live chunks for its staged version (``sha``, chunking ``key``) and
    their BM25 postings, in the caller's transaction, and record the version in ``T_files``
    (``modified``: the file's modification time, ISO 8601, for date filters).

    Raises:
        RuntimeError: the staged chunks are not ``count`` (nothing is then published).
    """
    n = schema.names(table)
    cols = sql.SQL(", ").join(map(sql.Identifier, CHUNK_COLUMNS))
    conn.execute(sql.SQL("DELETE FROM {t} WHERE source_file = %s").format(t=n["chunks"]), [f])
    moved = conn.execute(sql.SQL("INSERT INTO {t} ({c}) SELECT {c} FROM {s} WHERE source_file = %s AND "
                                 "file_sha256 = %s AND chunking = %s").format(t=n["chunks"], c=cols, s=n["staging"]),
                         [f, sha, key]).rowcount
    if moved != count:  # never publish a partial version
        raise RuntimeError(f"{f}: {moved} chunks staged, expected {count}")
    postings.write(conn, table, sql.SQL("c.source_file = %s"), [f])
    conn.execute(sql.SQL("DELETE FROM {s} WHERE source_file = %s").format(s=n["staging"]), [f])
    conn.execute(sql.SQL("""INSERT INTO {t} (source_file, sha256, chunking, documents, chunks, indexed_at, modified)
        VALUES (%s, %s, %s, %s, %s, now(), %s) ON CONFLICT (source_file) DO UPDATE SET sha256 = excluded.sha256,
        chunking = excluded.chunking, documents = excluded.documents, chunks = excluded.chunks,
        indexed_at = excluded.indexed_at, modified = excluded.modified""").format(t=n["files"]),
                 [f, sha, key, documents, count, modified])
    _bump(conn, table)


def _remove(conn, table: str, f: str) -> None:
    n = schema.names(table)
    conn.execute(sql.SQL("DELETE FROM {t} WHERE source_file = %s").format(t=n["chunks"]), [f])
    conn.execute(sql.SQL("DELETE FROM {t} WHERE source_file = %s").format(t=n["files"]), [f])
    _bump(conn, table)


def _bump(conn, table: str) -> None:
    meta = schema.read_meta(conn, table)
    schema.update_meta(conn, table, {"generation": int(meta.get("generation", 0)) + 1, "updated": _now()})


def _refresh_vocabulary(db, table: str, embedder) -> None:
    """Rebuild ``T_terms`` from the live chunks and their stored vectors when the generation
    (or the vocabulary parameters) changed since it was built."""
    n = schema.names(table)
    meta = db.run(lambda c: schema.read_meta(c, table), what="read manifest")
    stamp = {"generation": meta.get("generation", 0), "params": DEFAULT_PARAMS}
    if meta.get("vocabulary", {}).get("stamp") == stamp:
        return
    rows = db.run(lambda c: c.execute(sql.SQL(
        """SELECT chunk_id, doc_id, text, title, url, heading, source_path, page, embedding FROM {t}
        ORDER BY source_file COLLATE "C", position""").format(t=n["chunks"])).fetchall(), what="read chunks")
    chunks = [Chunk(*r[:8]) for r in rows]
    vectors = np.array([as_array(r[8]) for r in rows], dtype=np.float32).reshape(len(rows), embedder.dimensions)
    vocabulary = build_vocabulary(chunks, vectors, embedder)

    def write(conn):
        conn.execute(sql.SQL("DELETE FROM {t}").format(t=n["terms"]))
        copy_rows(conn, n["terms"], ["position", "term", "kind", "embedding"], ["int4", "text", "text", "vector"],
              [[i, t, k, v] for i, (t, k, v) in enumerate(zip(vocabulary.terms, vocabulary.kinds, vocabulary.vectors))])
        schema.update_meta(conn, table, {"vocabulary": {"stamp": stamp, "count": len(vocabulary)}})

    db.run(write, what="write vocabulary")
    log.info("vocabulary of %s: %d terms", table, len(vocabulary))
