"""The tables of a pgvector knowledge base, created on the first index run.

For a knowledge base whose URL says ``table=T``:

* ``T``: the live chunks, what search reads. One row per chunk: ``source_file`` (the corpus
  file, relative to the indexed folder, as in the manifest's ``files``), ``position`` (order
  within the file), the :class:`~program.retrieval.chunking.Chunk` fields (``page`` 0 for a
  document without pages) and ``embedding vector(d)``. An HNSW index over ``embedding`` with
  ``vector_cosine_ops`` (``m``,
  ``ef_construction`` as recorded in the manifest) answers ``ORDER BY embedding <=> q``;
  b-tree indexes on ``source_file`` and ``doc_id`` serve the metadata filters.
* ``T_staging``: chunks embedded by an index run but not yet published (same columns plus
  ``file_sha256``, no vector index). Search never reads it.
* ``T_files``: per corpus file, the sha256 and chunking of the version that is live, and the
  file's modification time when it was indexed (``modified``; null in tables made before it was
  recorded), which date filters read.
* ``T_terms``: the knowledge base's vocabulary (:mod:`program.retrieval.vocabulary`).
* ``T_meta``: one row, the manifest's fixed part (embedding model and dimensions, chunking,
  index parameters, source path, creation time, generation counter, vocabulary stamp).
"""

from __future__ import annotations

import json

from psycopg import sql

from program.retrieval.base import KnowledgeBaseError

FORMAT_VERSION = 1
HNSW_DEFAULTS = {"m": 16, "ef_construction": 64, "ef_search": 100}


def names(table: str) -> dict[str, sql.Identifier]:
    """The SQL identifiers of the knowledge base's tables and indexes, by role."""
    return {role: sql.Identifier(table + suffix) for role, suffix in
            [("chunks", ""), ("staging", "_staging"), ("files", "_files"), ("terms", "_terms"),
             ("meta", "_meta"), ("hnsw", "_embedding_hnsw"), ("by_doc", "_doc_id")]}


def exists(conn, table: str) -> bool:
    """Whether ``table``'s meta table exists (i.e. the knowledge base was created)."""
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table + "_meta"]).fetchone()[0]


def create(conn, table: str, dimensions: int, hnsw: dict, meta: dict) -> None:
    """Create the extension, the five tables and their indexes, and write ``meta`` (one
    transaction, under an advisory lock so that concurrent first runs do not collide).
    A no-op for tables that exist."""
    n = names(table)
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"crag-kb-schema:{table}"])
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    columns = sql.SQL("""source_file text NOT NULL, position int NOT NULL, chunk_id text NOT NULL,
        doc_id text NOT NULL, text text NOT NULL, title text NOT NULL, url text NOT NULL,
        heading text NOT NULL, source_path text NOT NULL, page int NOT NULL DEFAULT 0,
        embedding vector({d}) NOT NULL""").format(
        d=sql.Literal(int(dimensions)))
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {t} ({cols}, PRIMARY KEY (source_file, chunk_id))").format(
        t=n["chunks"], cols=columns))
    conn.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {t} (file_sha256 text NOT NULL, chunking text NOT NULL,
        {cols}, PRIMARY KEY (source_file, file_sha256, chunking, chunk_id))""").format(t=n["staging"], cols=columns))
    conn.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {t} (source_file text PRIMARY KEY, sha256 text NOT NULL,
        chunking text NOT NULL, documents int NOT NULL, chunks int NOT NULL, indexed_at timestamptz NOT NULL)""")
                 .format(
        t=n["files"]))
    conn.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {t} (position int PRIMARY KEY, term text NOT NULL,
        kind text NOT NULL, embedding vector({d}) NOT NULL)""").format(t=n["terms"], d=sql.Literal(int(dimensions))))
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {t} (id int PRIMARY KEY CHECK (id = 1), manifest jsonb NOT NULL)")
                 .format(t=n["meta"]))
    conn.execute(sql.SQL("""CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops)
        WITH (m = {m}, ef_construction = {ef})""").format(
        i=n["hnsw"], t=n["chunks"], m=sql.Literal(int(hnsw["m"])), ef=sql.Literal(int(hnsw["ef_construction"]))))
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (doc_id)").format(i=n["by_doc"], t=n["chunks"]))
    conn.execute(sql.SQL("INSERT INTO {t} (id, manifest) VALUES (1, %s) ON CONFLICT (id) DO NOTHING")
                 .format(t=n["meta"]), [json.dumps(meta)])
    add_page_column(conn, table)


def has_page_column(conn, table: str) -> bool:
    """Whether the live chunks table has the ``page`` column (tables built before PDFs were read lack it)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                        "AND attname = 'page' AND NOT attisdropped)", [table]).fetchone()[0]


def add_page_column(conn, table: str) -> None:
    """Give a table built before PDFs were read its ``page`` column, 0 for every chunk it holds
    (a constant default: PostgreSQL rewrites no row), and a files table made before modification
    times were recorded its ``modified`` column (null). A no-op where the columns exist."""
    for role in ("chunks", "staging"):
        conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS page int NOT NULL DEFAULT 0").format(
            t=names(table)[role]))
    conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS modified timestamptz").format(
        t=names(table)["files"]))


def read_meta(conn, table: str) -> dict:
    """The meta row's manifest dict."""
    row = conn.execute(sql.SQL("SELECT manifest FROM {t} WHERE id = 1").format(t=names(table)["meta"])).fetchone()
    return dict(row[0]) if row else {}


def update_meta(conn, table: str, changes: dict) -> dict:
    """Merge ``changes`` into the meta row (row-locked, so concurrent writers serialise); returns the result."""
    t = names(table)["meta"]
    meta = dict(conn.execute(sql.SQL("SELECT manifest FROM {t} WHERE id = 1 FOR UPDATE").format(t=t)).fetchone()[0])
    meta.update(changes)
    conn.execute(sql.SQL("UPDATE {t} SET manifest = %s WHERE id = 1").format(t=t), [json.dumps(meta)])
    return meta


def hnsw_parameters(conn, table: str) -> dict:
    """``{"m": .., "ef_construction": ..}`` as PostgreSQL holds them for the HNSW index (its
    ``reloptions``), so the manifest reports what the server uses, not what was asked."""
    row = conn.execute("SELECT c.reloptions FROM pg_class c WHERE c.oid = to_regclass(%s)",
                       [table + "_embedding_hnsw"]).fetchone()
    options = dict(o.split("=", 1) for o in (row[0] or [])) if row else {}
    return {k: int(options.get(k, HNSW_DEFAULTS[k])) for k in ("m", "ef_construction")}


def check_meta(meta: dict, embedder, where) -> None:
    """Raise :class:`KnowledgeBaseError` (one line) unless ``meta`` has this format version and
    ``embedder``'s model name and dimensions."""
    if meta.get("format_version") != FORMAT_VERSION:
        raise KnowledgeBaseError(f"knowledge base at {where} has format version {meta.get('format_version')!r}, "
                                 f"expected {FORMAT_VERSION}")
    built = meta.get("embedding") or {}
    if (built.get("model"), built.get("dimensions")) != (embedder.name, embedder.dimensions):
        raise KnowledgeBaseError(f"knowledge base at {where} was built with {built.get('model')!r} "
                                 f"({built.get('dimensions')}d), not {embedder.name!r} ({embedder.dimensions}d); "
                                 f"use that model or index into another table")
