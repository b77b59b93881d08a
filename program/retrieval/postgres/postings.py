"""The lexical side of a pgvector knowledge base: BM25 postings written from the same tokens
as the faiss backend's index, and the statistics BM25 reads.

For ``table=T``:

* ``T_postings``: one row per (lexeme, chunk): ``tf`` (occurrences in the chunk), ``dl`` (the
  chunk's length in tokens) and ``impact``, the BM25 term-frequency part
  ``tf / (tf + k1 * (1 - b + b * dl / avgdl))`` at the mean length known when the row was
  written. The tokens are :func:`program.retrieval.lexical.tokens` of the embedded text
  (``base.embed_text``), so both backends index the same terms; PostgreSQL's own parser would
  not (it keeps ``k8s.io``, ``1.28`` and ``apps/v1`` whole and stems ``internal`` to
  ``intern``: on Kubernetes' docs 627 of 1,144 chunks got other terms, and hybrid search
  agreed with faiss's on 16 of 20 dev questions). Its primary key (lexeme first, holding
  ``tf`` and ``dl``) answers the exact scores; an index on ``(lexeme, impact DESC)`` holding the
  rest of the row gives each term's best postings first (impact-ordered postings, Anh and Moffat
  2002, "Impact transformations: effective and efficient sparse representations"). Both are
  read without visiting the table (index-only scans): reading a term's postings from the
  table made PostgreSQL fetch every one of them, 708 pages for a two-word question at 10k
  chunks, and sort them itself. A foreign key to ``T`` deletes a chunk's postings with it.
* ``T_lexicon``: per lexeme, the number of live chunks holding it; the manifest's
  ``"lexical"`` entry: the chunk count, their mean length and the generation they were counted
  at. Recounted in one transaction after an index run that changed anything.

A file's postings are written in the transaction that publishes its chunks
(:func:`program.retrieval.postgres.ingest.publish_file`), so a reader sees both or neither.
A table indexed before this version (no postings; or the ``tsv`` column of PostgreSQL's full
text search that the previous version kept) is upgraded by :func:`ensure`.
"""

from __future__ import annotations

from collections import Counter

from psycopg import sql

from program.retrieval.base import embed_text
from program.retrieval.chunking import Chunk
from program.retrieval.lexical import PARAMS, tokens
from program.retrieval.postgres import schema

FORMAT = "postings-2"  # the manifest's "lexical" entry names it: a table without it is upgraded
# postings-2: the impact index holds whole postings (a postings-1 table gets it on connect)


def names(table: str) -> dict[str, sql.Identifier]:
    """Identifiers of the postings and lexicon tables and the postings' indexes."""
    return {"postings": sql.Identifier(table + "_postings"), "lexicon": sql.Identifier(table + "_lexicon"),
            "impact": sql.Identifier(table + "_postings_by_impact"),
            "impact_before": sql.Identifier(table + "_postings_impact"),
            "by_chunk": sql.Identifier(table + "_postings_chunk")}


def is_current(conn, table: str) -> bool:
    """Whether ``table`` has its postings (False for a table indexed before this version)."""
    present = conn.execute("SELECT to_regclass(%s) IS NOT NULL", [table + "_postings"]).fetchone()[0]
    return bool(present) and (schema.read_meta(conn, table).get("lexical") or {}).get("format") == FORMAT


def ensure(conn, table: str) -> int:
    """Create the postings and lexicon tables where missing (in the caller's transaction, under
    the schema's advisory lock). Unless :func:`is_current`: drop the previous version's ``tsv``
    column, write the postings of every live chunk that has none and recount the lexicon.
    Returns the chunks whose postings were written."""
    n, t = names(table), schema.names(table)["chunks"]
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"crag-kb-schema:{table}"])
    conn.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {p} (lexeme text NOT NULL, source_file text NOT NULL,
        chunk_id text NOT NULL, tf int NOT NULL, dl int NOT NULL, impact real NOT NULL,
        PRIMARY KEY (lexeme, source_file, chunk_id) INCLUDE (tf, dl),
        FOREIGN KEY (source_file, chunk_id) REFERENCES {t} (source_file, chunk_id) ON DELETE CASCADE)""")
                 .format(p=n["postings"], t=t))
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {p} (lexeme, impact DESC) "
                         "INCLUDE (source_file, chunk_id, tf, dl)")
                 .format(i=n["impact"], p=n["postings"]))
    conn.execute(sql.SQL("DROP INDEX IF EXISTS {i}").format(i=n["impact_before"]))  # the covering one replaces it
    conn.execute(sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {p} (source_file, chunk_id)").format(
        i=n["by_chunk"], p=n["postings"]))
    conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {l} (lexeme text PRIMARY KEY, df int NOT NULL)")
                 .format(l=n["lexicon"]))
    if is_current(conn, table):
        return 0
    if conn.execute("SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                    "AND attname = 'tsv' AND NOT attisdropped)", [table]).fetchone()[0]:
        conn.execute(sql.SQL("ALTER TABLE {t} DROP COLUMN tsv").format(t=t))  # and its GIN index
    missing = sql.SQL("NOT EXISTS (SELECT 1 FROM {p} p WHERE p.source_file = c.source_file AND "
                      "p.chunk_id = c.chunk_id)").format(p=n["postings"])
    written = write(conn, table, missing)
    refresh(conn, table)
    return written


def write(conn, table: str, where: sql.Composable, params: list | None = None) -> int:
    """Write the postings of the live chunks ``c`` matching ``where`` (an SQL condition on
    ``c``) in the caller's transaction; returns how many chunks were read. Raises psycopg errors."""
    n, t = names(table), schema.names(table)["chunks"]
    rows = conn.execute(sql.SQL("SELECT c.source_file, c.chunk_id, c.title, c.heading, c.text FROM {t} c WHERE {w}")
                        .format(t=t, w=where), params or []).fetchall()
    counted = [(f, cid, Counter(tokens(embed_text(Chunk(cid, "", text, title, heading=heading)))))
               for f, cid, title, heading, text in rows]
    lengths = [sum(c.values()) for _, _, c in counted]
    avgdl = (schema.read_meta(conn, table).get("lexical") or {}).get("avgdl") or \
        (sum(lengths) / max(len(lengths), 1)) or 1.0
    k1, b = PARAMS["k1"], PARAMS["b"]
    with conn.cursor().copy(sql.SQL("COPY {p} (lexeme, source_file, chunk_id, tf, dl, impact) FROM STDIN")
                            .format(p=n["postings"])) as copy:
        for (f, cid, counts), dl in zip(counted, lengths):
            for lexeme, tf in counts.items():
                copy.write_row((lexeme, f, cid, tf, dl, tf / (tf + k1 * (1 - b + b * dl / avgdl))))
    return len(rows)


def vacuum(conn, table: str) -> None:
    """``VACUUM (ANALYZE)`` the postings after an index run changed them, on ``conn`` in
    autocommit mode (VACUUM runs outside a transaction). It marks the new rows visible to every
    transaction, so search reads them from the covering indexes alone instead of visiting the
    table for each (until autovacuum would get to it), and gives the planner their counts.
    Raises psycopg errors."""
    conn.execute(sql.SQL("VACUUM (ANALYZE) {p}").format(p=names(table)["postings"]))


def refresh(conn, table: str) -> None:
    """Recount ``T_lexicon`` and the manifest's ``"lexical"`` entry from the postings, unless
    they were counted at the current generation with the current BM25 parameters."""
    meta = schema.read_meta(conn, table)
    stamp = {"generation": meta.get("generation", 0), **PARAMS, "format": FORMAT}
    if {k: v for k, v in (meta.get("lexical") or {}).items() if k in stamp} == stamp:
        return
    n, t = names(table), schema.names(table)["chunks"]
    conn.execute(sql.SQL("DELETE FROM {l}").format(l=n["lexicon"]))
    conn.execute(sql.SQL("INSERT INTO {l} (lexeme, df) SELECT lexeme, count(*) FROM {p} GROUP BY lexeme")
                 .format(l=n["lexicon"], p=n["postings"]))
    chunks, occurrences = conn.execute(sql.SQL(
        "SELECT (SELECT count(*) FROM {t}), (SELECT coalesce(sum(tf), 0) FROM {p})").format(
        t=t, p=n["postings"])).fetchone()
    schema.update_meta(conn, table, {"lexical": {**stamp, "chunks": int(chunks),
                                                 "avgdl": float(occurrences) / max(int(chunks), 1)}})
