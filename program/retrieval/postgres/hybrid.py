"""The one SQL statement of hybrid search: pgvector's cosine ranking and a BM25 ranking over the
postings (:mod:`program.retrieval.postgres.postings`), fused by reciprocal rank (Cormack et al.
2009, :mod:`program.retrieval.fusion`).

Parts of the statement, as common table expressions:

* ``stats``: the chunk count and mean length from the manifest;
* ``dense``: the ``depth`` nearest chunks by ``embedding <=> q`` (the HNSW index), numbered;
* ``feedback`` and ``terms``: the query's tokens (:func:`program.retrieval.lexical.tokens`, as
  the faiss backend's) found in ``T_lexicon``, plus the fusion's ``feedback`` terms of the
  first dense chunks (:mod:`program.retrieval.feedback`, read from their postings), each with
  its idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))``;
* ``fetched`` and ``best``: each term's ``PER_TERM`` postings of highest impact (its index),
  summed by chunk as ``idf * impact``; the ``2 * depth`` best chunks are the candidates.
  Summing every posting of a common term costs milliseconds per thousand chunks holding it
  (44 ms a query at 100k chunks); the candidates cost a bounded number of index reads;
* ``read`` and ``lexical``: the candidates scored exactly, Lucene's BM25 as ``bm25s`` scores it
  with the current mean length: a term of at most ``PER_TERM`` postings was fetched whole; a
  commoner one is read for each candidate by its primary key (``LIMIT 1`` keeps the planner
  from merging the whole postings table instead); numbered, the best ``depth``. On the
  labeled domains' and PopQA's dev questions this ranking gives the same fused top 5 as
  scoring every chunk; a chunk outside every term's best postings and outside the candidates
  is not ranked, which is where the two can differ;
* both BM25 orderings compare their sums as ``float4`` (as ``bm25s`` scores), so that a tie
  goes to the chunk id whatever order a plan summed a chunk's terms in (the store prepares the
  statement and runs its generic plan, which sums in another order than a custom plan);
* the fused ranking, ``sum of weight / (k + rank)``, ties to the better rank, dense first; its
  first ``k`` are joined to their chunks (not all of the up to ``2 * depth`` fused ones), each
  row's score its cosine to the query, as dense search reports it.

A ranking given depth 0 is left out, so the same statement serves ``mode="lexical"``.
"""

from __future__ import annotations

from psycopg import sql

from program.retrieval.feedback import FEEDBACK_CHUNKS
from program.retrieval.lexical import PARAMS, tokens
from program.retrieval.postgres import postings, schema

PER_TERM = 200  # postings read per query term, best impact first

_FUSED = """WITH stats AS (
    SELECT (manifest->'lexical'->>'chunks')::float8 AS n, (manifest->'lexical'->>'avgdl')::float8 AS avgdl
    FROM {meta} WHERE id = 1),
dense AS (
    SELECT source_file, chunk_id, row_number() OVER (ORDER BY d, chunk_id) AS r FROM (
        SELECT source_file, chunk_id, embedding <=> %(vector)s AS d FROM {t} WHERE true {filters}
        ORDER BY embedding <=> %(vector)s LIMIT %(dense_depth)s) x),
feedback AS (
    SELECT p.lexeme, l.df FROM dense d CROSS JOIN stats s
    JOIN {postings} p ON p.source_file = d.source_file AND p.chunk_id = d.chunk_id
    JOIN {lexicon} l ON l.lexeme = p.lexeme
    WHERE d.r <= %(feedback_chunks)s AND NOT p.lexeme = ANY (%(terms)s::text[])
    GROUP BY p.lexeme, l.df, s.n ORDER BY sum(p.tf) * ln(s.n / l.df) DESC, p.lexeme COLLATE "C" LIMIT %(feedback)s),
terms AS (
    SELECT u.lexeme, u.df, ln(1 + (s.n - u.df + 0.5) / (u.df + 0.5)) AS idf FROM stats s, (
        SELECT lexeme, df FROM {lexicon} WHERE lexeme = ANY (%(terms)s::text[])
        UNION ALL SELECT lexeme, df FROM feedback) u),
fetched AS (
    SELECT t.lexeme, t.idf, b.source_file, b.chunk_id, b.tf, b.dl, b.impact FROM terms t CROSS JOIN LATERAL (
        SELECT p.source_file, p.chunk_id, p.tf, p.dl, p.impact FROM {postings} p {chunks}
        WHERE p.lexeme = t.lexeme {chunk_filters} ORDER BY p.impact DESC LIMIT %(per_term)s) b),
best AS (
    SELECT source_file, chunk_id FROM fetched GROUP BY source_file, chunk_id
    ORDER BY sum(idf * impact)::float4 DESC, chunk_id LIMIT %(candidates)s),
read AS (
    SELECT f.source_file, f.chunk_id, f.lexeme, f.idf, f.tf, f.dl FROM fetched f JOIN best USING (source_file, chunk_id)
    UNION SELECT c.source_file, c.chunk_id, t.lexeme, t.idf, p.tf, p.dl FROM best c
        CROSS JOIN terms t CROSS JOIN LATERAL (
            SELECT tf, dl FROM {postings} WHERE lexeme = t.lexeme AND source_file = c.source_file
            AND chunk_id = c.chunk_id LIMIT 1) p
        WHERE t.df > %(per_term)s),
lexical AS (
    SELECT source_file, chunk_id, row_number() OVER (ORDER BY s DESC, chunk_id) AS r FROM (
        SELECT r.source_file, r.chunk_id,
            sum(r.idf * r.tf / (r.tf + %(k1)s * (1 - %(b)s + %(b)s * r.dl / s.avgdl)))::float4 AS s
        FROM read r CROSS JOIN stats s
        GROUP BY r.source_file, r.chunk_id ORDER BY s DESC, r.chunk_id LIMIT %(lexical_depth)s) x),
fused AS (
    SELECT source_file, chunk_id, sum(w / (%(rrf_k)s + r)) AS f, min(r * 2 + src) AS first FROM (
        SELECT source_file, chunk_id, r, %(dense_weight)s::float8 AS w, 0 AS src FROM dense
        UNION ALL SELECT source_file, chunk_id, r, %(lexical_weight)s::float8, 1 FROM lexical) u
    GROUP BY source_file, chunk_id),
top AS (SELECT source_file, chunk_id, f, first FROM fused ORDER BY f DESC, first LIMIT %(k)s)
SELECT c.chunk_id, c.text, c.title, c.url, c.source_path, 1 - (c.embedding <=> %(vector)s), c.page
FROM top f JOIN {t} c USING (source_file, chunk_id)
ORDER BY f.f DESC, f.first"""


def fused_query(table: str, filters: list[str], pages: bool = False) -> sql.Composed:
    """The statement for ``table``; ``filters`` names the columns (``source_file``, ``doc_id``)
    restricted to ``%(<column>)s`` arrays in both rankings; ``pages``: also ``page`` between
    ``%(page_first)s`` and ``%(page_last)s`` (a filter's page range)."""
    def where(alias: str, file_alias: str) -> sql.Composable:
        parts = [sql.SQL(" AND {a}{c} = ANY(%({p})s)").format(a=sql.SQL(file_alias if c == "source_file" else alias),
                                                            c=sql.Identifier(c), p=sql.SQL(c)) for c in filters]
        if pages:
            parts.append(sql.SQL(" AND {a}page BETWEEN %(page_first)s AND %(page_last)s").format(a=sql.SQL(alias)))
        return sql.SQL("").join(parts)

    chunks = schema.names(table)["chunks"]
    # the postings hold their file: a file filter reads them alone; a document or page filter joins the chunks
    join = pages or any(c != "source_file" for c in filters)
    joined = sql.SQL("JOIN {t} c ON c.source_file = p.source_file AND c.chunk_id = p.chunk_id").format(t=chunks)
    return sql.SQL(_FUSED).format(meta=schema.names(table)["meta"], lexicon=postings.names(table)["lexicon"],
                                  postings=postings.names(table)["postings"], t=chunks, filters=where("", ""),
                                  chunks=joined if join else sql.SQL(""), chunk_filters=where("c.", "p."))


def parameters(text: str, vector, k: int, mode: str, fusion) -> dict:
    """The statement's parameters for one query (``fusion``: a :class:`~program.retrieval.fusion.FusionParams`)."""
    depth = max(k, fusion.depth)
    return {"terms": list(dict.fromkeys(tokens(text))), "vector": vector, "k": k,
            "dense_depth": 0 if mode == "lexical" else depth, "lexical_depth": depth, "per_term": PER_TERM,
            "candidates": 2 * depth, "feedback": fusion.feedback, "feedback_chunks": FEEDBACK_CHUNKS,
            "rrf_k": fusion.k, "dense_weight": fusion.dense, "lexical_weight": fusion.lexical,
            "k1": PARAMS["k1"], "b": PARAMS["b"]}
