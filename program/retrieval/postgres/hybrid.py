"""The one SQL statement of hybrid search: pgvector's cosine ranking and a BM25 ranking over the
full-text column, fused by reciprocal rank (Cormack et al. 2009, :mod:`program.retrieval.fusion`).

Parts of the statement, as common table expressions:

* ``stats`` and ``terms``: the chunk count and mean length from the manifest, the query's
  lexemes (``to_tsvector('english', query)``) found in ``T_lexicon`` with their idf,
  ``ln(1 + (N - df + 0.5) / (df + 0.5))``;
* ``dense``: the ``depth`` nearest chunks by ``embedding <=> q`` (the HNSW index), numbered;
* ``lexical``: the chunks matching any query lexeme (``tsv @@ q``, the GIN index), scored by
  Lucene's BM25 as ``bm25s`` scores them (tf = a lexeme's positions, length = all positions)
  and numbered, the best ``depth``;
* the fused ranking, ``sum of weight / (k + rank)``, ties to the better rank, dense first; each
  row's score is its cosine to the query, as dense search reports it.

A ranking given depth 0 is left out, so the same statement serves ``mode="lexical"``.
"""

from __future__ import annotations

from psycopg import sql

from program.retrieval.lexical import PARAMS
from program.retrieval.postgres import schema
from program.retrieval.postgres.fulltext import names as fulltext_names

_FUSED = """WITH stats AS (
    SELECT (manifest->'lexical'->>'chunks')::float8 AS n, (manifest->'lexical'->>'avgdl')::float8 AS avgdl FROM {meta}),
terms AS (
    SELECT l.lexeme, ln(1 + (s.n - l.df + 0.5) / (l.df + 0.5)) AS idf FROM {lexicon} l, stats s
    WHERE l.lexeme = ANY (tsvector_to_array(to_tsvector('english'::regconfig, %(text)s)))),
dense AS (
    SELECT source_file, chunk_id, row_number() OVER (ORDER BY d, chunk_id) AS r FROM (
        SELECT source_file, chunk_id, embedding <=> %(vector)s AS d FROM {t} WHERE true {filters}
        ORDER BY embedding <=> %(vector)s LIMIT %(dense_depth)s) x),
lexical AS (
    SELECT source_file, chunk_id, row_number() OVER (ORDER BY s DESC, chunk_id) AS r FROM (
        SELECT c.source_file, c.chunk_id, sum(t.idf * cardinality(u.positions) / (cardinality(u.positions)
            + %(k1)s * (1 - %(b)s + %(b)s * (SELECT sum(cardinality(p.positions)) FROM unnest(c.tsv) p) / s.avgdl))) AS s
        FROM {t} c CROSS JOIN LATERAL unnest(c.tsv) u JOIN terms t ON t.lexeme = u.lexeme CROSS JOIN stats s
        WHERE c.tsv @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM terms) {filters}
        GROUP BY c.source_file, c.chunk_id, s.avgdl
        ORDER BY s DESC, c.chunk_id LIMIT %(lexical_depth)s) x),
fused AS (
    SELECT source_file, chunk_id, sum(w / (%(rrf_k)s + r)) AS f, min(r * 2 + src) AS first FROM (
        SELECT source_file, chunk_id, r, %(dense_weight)s::float8 AS w, 0 AS src FROM dense
        UNION ALL SELECT source_file, chunk_id, r, %(lexical_weight)s::float8, 1 FROM lexical) u
    GROUP BY source_file, chunk_id)
SELECT c.chunk_id, c.text, c.title, c.url, c.source_path, 1 - (c.embedding <=> %(vector)s)
FROM fused f JOIN {t} c USING (source_file, chunk_id)
ORDER BY f.f DESC, f.first LIMIT %(k)s"""


def fused_query(table: str, filters: list[str]) -> sql.Composed:
    """The statement for ``table``; ``filters`` names the columns (``source_file``, ``doc_id``)
    restricted to ``%(<column>)s`` arrays in both rankings."""
    where = sql.SQL("").join(sql.SQL(" AND {c} = ANY(%({p})s)").format(c=sql.Identifier(c), p=sql.SQL(c))
                             for c in filters)
    return sql.SQL(_FUSED).format(meta=schema.names(table)["meta"], lexicon=fulltext_names(table)["lexicon"],
                                  t=schema.names(table)["chunks"], filters=where)


def parameters(text: str, vector, k: int, mode: str, fusion) -> dict:
    """The statement's parameters for one query (``fusion``: a :class:`~program.retrieval.fusion.FusionParams`)."""
    depth = max(k, fusion.depth)
    return {"text": text, "vector": vector, "k": k, "dense_depth": 0 if mode == "lexical" else depth,
            "lexical_depth": depth, "rrf_k": fusion.k, "dense_weight": fusion.dense,
            "lexical_weight": fusion.lexical, "k1": PARAMS["k1"], "b": PARAMS["b"]}
