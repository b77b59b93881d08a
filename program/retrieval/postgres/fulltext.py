"""The full-text side of a pgvector knowledge base: a generated ``tsvector`` column, its GIN
index, and the BM25 statistics the fused query reads.

For ``table=T``:

* ``T.tsv``: ``tsvector GENERATED ALWAYS AS (to_tsvector('english', title, heading, text)) STORED``,
  the heading left out when it repeats the title, as the faiss backend indexes the embedded
  text (``base.embed_text``); PostgreSQL keeps it in step with every insert and update.
  ``T_tsv_gin``: a GIN index over it, which answers ``tsv @@ query``.
* ``T_lexicon``: per lexeme, the number of live chunks holding it (``ts_stat``'s ``ndoc``);
  the manifest's ``"lexical"`` entry: the chunk count, their mean length in lexeme occurrences
  and the generation they were counted at. Refreshed in one transaction after an index run that
  changed anything; BM25's idf and length norm (:mod:`program.retrieval.lexical`) come from it.

A table created before hybrid search has neither: :func:`ensure` adds them (``ALTER TABLE``,
which rewrites the table once) and counts the lexicon.
"""

from __future__ import annotations

from psycopg import sql

from program.retrieval.lexical import PARAMS
from program.retrieval.postgres import schema

TSV = """to_tsvector('english'::regconfig, title || ' ' || CASE WHEN heading <> title THEN heading ELSE '' END
    || ' ' || text)"""


def names(table: str) -> dict[str, sql.Identifier]:
    """Identifiers of the lexicon table and the GIN index."""
    return {"lexicon": sql.Identifier(table + "_lexicon"), "gin": sql.Identifier(table + "_tsv_gin")}


def has_column(conn, table: str) -> bool:
    """Whether ``table`` has its ``tsv`` column (False for a table indexed before hybrid search)."""
    return conn.execute("SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                        "AND attname = 'tsv' AND NOT attisdropped)", [table]).fetchone()[0]


def ensure(conn, table: str) -> None:
    """Add the ``tsv`` column, its GIN index and the lexicon table where missing (in the caller's
    transaction, under the schema's advisory lock); then count the lexicon if it is stale."""
    n, t = names(table), schema.names(table)["chunks"]
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"crag-kb-schema:{table}"])
    conn.execute(sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS tsv tsvector GENERATED ALWAYS AS ({e}) STORED")
                 .format(t=t, e=sql.SQL(TSV)))
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING gin (tsv)").format(i=n["gin"], t=t))
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {l} (lexeme text PRIMARY KEY, df int NOT NULL)")
                 .format(l=n["lexicon"]))
    refresh(conn, table)


def refresh(conn, table: str) -> None:
    """Recount ``T_lexicon`` and the manifest's ``"lexical"`` entry from the live chunks, unless
    they were counted at the current generation with the current BM25 parameters."""
    meta = schema.read_meta(conn, table)
    stamp = {"generation": meta.get("generation", 0), **PARAMS}
    if {k: v for k, v in (meta.get("lexical") or {}).items() if k in stamp} == stamp:
        return
    n, t = names(table), schema.names(table)["chunks"]
    rows = sql.SQL("SELECT tsv FROM {t}").format(t=t).as_string(conn)
    conn.execute(sql.SQL("DELETE FROM {l}").format(l=n["lexicon"]))
    conn.execute(sql.SQL("INSERT INTO {l} (lexeme, df) SELECT word, ndoc FROM ts_stat(%s)").format(l=n["lexicon"]),
                 [rows])
    chunks, occurrences = conn.execute(sql.SQL(
        "SELECT (SELECT count(*) FROM {t}), (SELECT coalesce(sum(nentry), 0) FROM ts_stat(%s))").format(t=t),
        [rows]).fetchone()
    schema.update_meta(conn, table, {"lexical": {**stamp, "chunks": int(chunks),
                                                 "avgdl": float(occurrences) / max(int(chunks), 1)}})
