"""The knowledge base in PostgreSQL with pgvector: same chunks, embeddings and manifest rules
as the faiss one, shared by several processes and updated while they search.

Open one with ``KnowledgeBase.connect("postgresql://user@host:5432/db?table=docs")`` (or
:meth:`PgVectorKnowledgeBase.connect`); fill it with :meth:`PgVectorKnowledgeBase.build`
(``python -m program index PATH --kb URL``). Tables: :mod:`program.retrieval.postgres.schema`;
ingestion: :mod:`program.retrieval.postgres.ingest`.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
from psycopg import sql

from program.retrieval.base import IndexNotFoundError, KnowledgeBaseError
from program.retrieval.chunking import Chunk, chunking_params
from program.retrieval.embedding import get_embedder
from program.retrieval.filters import DocumentFilter, Within, file_time, select
from program.retrieval.fusion import HYBRID, FusionParams, check_mode
from program.retrieval.mentions import forms, searchable
from program.retrieval.postgres import hybrid, postings, schema
from program.retrieval.postgres.connection import Database
from program.retrieval.postgres.ingest import index_corpus
from program.retrieval.postgres.schema import check_meta
from program.retrieval.postgres.state import DatabaseState
from program.retrieval.postgres.url import DatabaseURL
from program.types import Passage

log = logging.getLogger(__name__)

CHUNKING_DEFAULTS = {"target_tokens": 200, "max_tokens": 300, "overlap_tokens": 30}


def _as_list(value) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


class PgVectorKnowledgeBase:
    """Hybrid search over chunks stored in PostgreSQL: cosine distance (HNSW index) and BM25
    over the chunks' postings (B-tree indexes), fused by reciprocal rank in one statement.

    Same contract as :class:`program.retrieval.KnowledgeBase` (the faiss one): ``search``,
    ``search_batch``, ``len()``, ``manifest``, ``candidate_terms``. Build with :meth:`build`,
    open with :meth:`connect`; close with :meth:`close` (or use it as a context manager).

    Attributes:
        url: the parsed :class:`DatabaseURL` (``str()`` hides the password).
        embedder: embeds queries; its model and dimensions match the table's.
    """

    def __init__(self, db: Database, embedder, ef_search: int, build_id: str = "", last_ingest=None):
        self.url, self._db, self.embedder, self.ef_search = db.url, db, embedder, ef_search
        self.last_ingest = last_ingest  # the IngestReport of the build that opened it (``build``), else None
        self._names = schema.names(db.url.table)
        self._build_id = build_id

    # ------------------------------------------------------------------ open / build
    @classmethod
    def connect(cls, url: str, embedder=None, *, attempts: int = 3, pool_size: int = 4,
                timeout: float = 10.0, last_ingest=None) -> "PgVectorKnowledgeBase":
        """Open the knowledge base at ``url`` (``postgresql://...?table=NAME``).

        Args:
            url: see :mod:`program.retrieval.postgres.url`.
            embedder: for queries; default the shared all-MiniLM-L6-v2 (loaded on first search).
            attempts: tries per statement when the connection is lost (1 = no retry).
            pool_size: at most this many connections to the server.
            timeout: seconds to wait for a connection, per attempt.
            last_ingest: the ``IngestReport`` of the build that opens it (``build``).

        Raises:
            ValueError: a malformed URL or table name.
            KnowledgeBaseUnavailable: the server cannot be reached in ``attempts`` tries.
            IndexNotFoundError: the database has no such knowledge base.
            KnowledgeBaseError: the table was built with another embedding model or dimension.
        """
        db = Database(DatabaseURL.parse(url), max_size=pool_size, attempts=attempts, connect_timeout=timeout)
        try:
            meta = db.run(lambda c: schema.read_meta(c, db.url.table) if schema.exists(c, db.url.table) else None,
                          what="open")
            if meta is None:
                raise IndexNotFoundError(f"no knowledge base at {db.url}; build it with "
                                         f"python -m program index PATH --kb '{db.url}'")
            emb = embedder or get_embedder()
            check_meta(meta, emb, db.url)
            if not db.run(lambda c: schema.has_page_column(c, db.url.table), what="open"):
                db.run(lambda c: schema.add_page_column(c, db.url.table), what="add the page column")
                log.warning("knowledge base at %s had no page column (indexed by an earlier version): added it", db.url)
            if not db.run(lambda c: postings.is_current(c, db.url.table), what="open"):
                written = db.run(lambda c: postings.ensure(c, db.url.table), what="write the BM25 postings")
                if written:
                    log.warning("knowledge base at %s had no BM25 postings (indexed by an earlier version): "
                                "wrote them for its %d chunks", db.url, written)
                else:
                    log.warning("knowledge base at %s: rebuilt its BM25 postings' index (indexed by an earlier "
                                "version)", db.url)
        except BaseException:
            db.close()
            raise
        return cls(db, emb, int(meta["index"]["ef_search"]), _generation(meta), last_ingest)

    @classmethod
    def build(cls, source_path: str | Path, url: str, embedder=None, *, target_tokens: int = 200,
              max_tokens: int = 300, overlap_tokens: int = 30, hnsw: dict | None = None, batch_size: int = 256,
              with_vocabulary: bool = True) -> "PgVectorKnowledgeBase":
        """Index the corpus at ``source_path`` into ``url``'s table and open it.

        Only new and changed files are chunked and embedded, in batches of ``batch_size``
        chunks per transaction; each file's new chunks replace its old ones in one transaction;
        files gone from the corpus are removed (:mod:`program.retrieval.postgres.ingest`).
        ``hnsw``: ``m``, ``ef_construction`` (fixed at creation), ``ef_search`` (any time);
        defaults ``schema.HNSW_DEFAULTS``. The run's :class:`IngestReport` is in ``.last_ingest``.

        Raises:
            CorpusError: the corpus is missing, malformed or empty.
            ValueError: invalid chunking parameters or URL.
            KnowledgeBaseError: another embedding model, dimension or HNSW build parameters.
            KnowledgeBaseUnavailable: the server cannot be reached.
        """
        if not 0 < target_tokens <= max_tokens or not 0 <= overlap_tokens < target_tokens:
            raise ValueError(f"bad chunking: target {target_tokens}, max {max_tokens}, overlap {overlap_tokens}")
        emb = embedder or get_embedder()
        chunking = chunking_params(target_tokens, max_tokens, overlap_tokens)
        db = Database(DatabaseURL.parse(url), max_size=2)
        try:
            report = index_corpus(db, db.url.table, Path(source_path).resolve(), emb, chunking, hnsw,
                                  batch_size=batch_size, with_vocabulary=with_vocabulary)
        finally:
            db.close()
        return cls.connect(url, emb, last_ingest=report)

    def close(self) -> None:
        """Close the connection pool."""
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ what CRAG asks
    def __len__(self) -> int:
        """Live chunks, counted now."""
        return self._db.run(lambda c: c.execute(sql.SQL("SELECT count(*) FROM {t}").format(
            t=self._names["chunks"])).fetchone()[0], what="count chunks")

    def __repr__(self) -> str:
        return f"PgVectorKnowledgeBase({str(self.url)!r})"

    # ------------------------------------------------------------------ what follows the knowledge base
    def state(self, namespace: str) -> DatabaseState:
        """What is learned about this knowledge base for ``namespace`` (a compile), in its database
        (``T_state``, :mod:`program.retrieval.postgres.state`): every app server over it shares it."""
        return DatabaseState(self._db, namespace)

    @property
    def build_id(self) -> str:
        """The generation this object was opened at (``updated`` time and counter)."""
        return self._build_id

    def saved_build(self) -> str | None:
        """The generation live in the database now (an index run publishes a new one), or None
        when the server cannot be reached."""
        try:
            return _generation(self._db.run(lambda c: schema.read_meta(c, self.url.table), what="read generation"))
        except KnowledgeBaseError:
            return None

    @property
    def manifest(self) -> dict:
        """The manifest as the faiss backend writes it, read now in one snapshot: format version,
        backend, embedding, chunking, index (``type`` hnsw, ``metric`` cosine, ``opclass``,
        ``m``, ``ef_construction``, ``ef_search``), ``files`` (relative path -> sha256),
        ``documents``, ``chunk_count``, ``source_path``, ``created``, ``updated``, ``generation``."""
        def read(conn):
            meta = schema.read_meta(conn, self.url.table)
            rows = conn.execute(sql.SQL("SELECT source_file, sha256, documents, chunks FROM {t} "
                                        "ORDER BY source_file").format(t=self._names["files"])).fetchall()
            return {**meta, "files": {r[0]: r[1] for r in rows}, "documents": sum(r[2] for r in rows),
                    "chunk_count": sum(r[3] for r in rows)}
        return self._db.run(read, what="read manifest")

    @property
    def chunks(self) -> list[Chunk]:
        """Every live chunk, read now, by file and position: what adapting the judges to this
        knowledge base reads (``program.adaptation.adapt``), as it reads a faiss knowledge base's ``chunks``."""
        rows = self._db.run(lambda c: c.execute(sql.SQL(
            "SELECT chunk_id, doc_id, text, title, url, heading, source_path, page FROM {t} "
            "ORDER BY source_file, position")
            .format(t=self._names["chunks"])).fetchall(), what="read chunks")
        return [Chunk(*r) for r in rows]

    def search(self, query: str, k: int = 3, mode: str = "hybrid", fusion: FusionParams = HYBRID, *,
               source: str | list[str] | None = None, document: str | list[str] | None = None,
               within: Within | None = None) -> list[Passage]:
        """Top-``k`` chunks for ``query``, best first.

        Args:
            query: the question or search text.
            k: passages wanted.
            mode: ``"hybrid"`` (default): the cosine and the BM25 ranking fused by reciprocal
                rank in one statement (:mod:`program.retrieval.postgres.hybrid`); ``"dense"``
                or ``"lexical"``: one of them.
            fusion: the fusion's rank constant, weights and depth.
            source: keep only chunks of this corpus file (or files), as named in
                ``manifest["files"]`` (path relative to the indexed folder).
            document: keep only chunks of this document id (or ids).
            within: only chunks of these corpus files and pages (``program.retrieval.filters``),
                in the ``WHERE`` of both rankings.

        Returns:
            Passages as the faiss backend makes them: ``id`` = chunk id, ``source="kb"``,
            ``score`` = cosine in [-1, 1] whatever the mode, ``url`` = document URL or else its
            source file path. ``[]`` for a blank query or k <= 0. Without filters the HNSW index answers
            (approximate, ``ef_search`` candidates); with filters the search is exact over the
            matching chunks.

        Raises:
            KnowledgeBaseUnavailable: the connection was lost on every attempt.
            ValueError: an unknown mode.
        """
        return self.search_batch([query], k, mode, fusion, source=source, document=document, within=within)[0]

    def search_batch(self, queries: list[str], k: int = 3, mode: str = "hybrid", fusion: FusionParams = HYBRID, *,
                     within: Within | None = None, **filters) -> list[list[Passage]]:
        """:meth:`search` for many queries with one embedding pass; one list per query."""
        check_mode(mode)
        out: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q and q.strip()]
        if within is not None:
            if within.empty:
                return out
            if within.files is not None:
                filters["source"] = sorted(within.files if filters.get("source") is None
                                           else within.files & set(_as_list(filters["source"])))
            filters["pages"] = within.pages
        if not live or k <= 0:
            return out
        vectors = self.embedder.encode([queries[i] for i in live])
        for i, vector in zip(live, vectors):
            out[i] = (self.search_vector(vector, k, **filters) if mode == "dense"
                      else self.search_fused(queries[i], vector, k, mode, fusion, **filters))
        return out

    def search_fused(self, query: str, vector: np.ndarray, k: int = 3, mode: str = "hybrid",
                     fusion: FusionParams = HYBRID, *, source=None, document=None, pages=None) -> list[Passage]:
        """:meth:`search` in ``mode`` ``"hybrid"`` or ``"lexical"`` for ``query`` and its embedding
        (shape ``(d,)``, L2-normalised float32): one statement (:mod:`program.retrieval.postgres.hybrid`);
        ``pages``: ``(first, last)`` pages the chunks start on, or None."""
        params = hybrid.parameters(query, np.asarray(vector, dtype=np.float32).reshape(-1), k, mode, fusion)
        filters = []
        for column, value in (("source_file", source), ("doc_id", document)):
            if value is not None:
                filters.append(column)
                params[column] = _as_list(value)
        if pages is not None:
            params["page_first"], params["page_last"] = pages
        statement = hybrid.fused_query(self.url.table, filters, pages is not None)

        def run(conn):
            # Planning the statement's eleven parts took 1.1 ms beside 4.6 ms running them at 100k
            # chunks: it is prepared once per connection and runs its generic plan.
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {n}; "
                                 "SET LOCAL plan_cache_mode = force_generic_plan").format(
                n=sql.Literal(min(1000, max(self.ef_search, params["dense_depth"])))))
            if filters or pages is not None:  # as in search_vector: the HNSW index would filter after its candidates
                conn.execute("SET LOCAL enable_indexscan = off")
            return conn.execute(statement, params, prepare=True).fetchall()

        return [Passage(id=r[0], text=r[1], source="kb", title=r[2], url=r[3] or r[4], score=float(r[5]),
                        page=r[6])
                for r in self._db.run(run, what="search")]

    def search_vector(self, vector: np.ndarray, k: int = 3, *, source=None, document=None,
                      pages=None) -> list[Passage]:
        """Dense :meth:`search` (cosine alone) for an embedded query (shape ``(d,)``, L2-normalised float32)."""
        where, params = [], []
        for column, value in (("source_file", source), ("doc_id", document)):
            if value is not None:
                where.append(sql.SQL("{c} = ANY(%s)").format(c=sql.Identifier(column)))
                params.append(_as_list(value))
        if pages is not None:
            where.append(sql.SQL("page BETWEEN %s AND %s"))
            params.extend(pages)
        query = sql.SQL("""SELECT chunk_id, text, title, url, source_path, 1 - (embedding <=> %s), page FROM {t} {w}
            ORDER BY embedding <=> %s LIMIT %s""").format(
            t=self._names["chunks"], w=sql.SQL("WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""))
        vector = np.asarray(vector, dtype=np.float32).reshape(-1)

        def run(conn):
            # HNSW returns at most ef_search rows; pgvector caps the setting at 1000
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {n}").format(
                n=sql.Literal(min(1000, max(self.ef_search, k)))))
            if where:  # the HNSW index filters after its ef_search candidates and would miss rows
                conn.execute("SET LOCAL enable_indexscan = off")
            return conn.execute(query, [vector, *params, vector, k]).fetchall()

        return [Passage(id=r[0], text=r[1], source="kb", title=r[2], url=r[3] or r[4], score=float(r[5]),
                        page=r[6])
                for r in self._db.run(run, what="search")]

    def mentions(self, terms, *, within: Within | None = None) -> set[str]:
        """The ``terms`` that some live chunk's text or title holds as a word, in either number
        (case-insensitive regular expression per term, as :meth:`program.retrieval.KnowledgeBase.mentions`
        reads its word set), among the chunks ``within`` when given; ``set()`` for no terms."""
        asked = searchable(terms)
        if not asked or (within is not None and within.empty):
            return set()
        patterns = [r"\m(" + "|".join(re.escape(f) for f in forms(t)) + r")\M" for t in asked]
        where, params = self._within_sql(within)
        query = sql.SQL("SELECT t FROM unnest(%s::text[], %s::text[]) AS a(t, p) WHERE EXISTS "
                        "(SELECT 1 FROM {c} WHERE (text ~* p OR title ~* p){w})").format(
            c=self._names["chunks"], w=where)
        rows = self._db.run(lambda c: c.execute(query, [asked, patterns, *params]).fetchall(), what="mentions")
        return {r[0] for r in rows}

    @staticmethod
    def _within_sql(within: Within | None) -> tuple[sql.Composable, list]:
        """`` AND ...`` restricting the chunks table to ``within``, and its parameters."""
        parts, params = [], []
        if within is not None and within.files is not None:
            parts.append(sql.SQL(" AND source_file = ANY(%s)"))
            params.append(sorted(within.files))
        if within is not None and within.pages is not None:
            parts.append(sql.SQL(" AND page BETWEEN %s AND %s"))
            params.extend(within.pages)
        return sql.SQL("").join(parts), params

    def count_within(self, within: Within | None) -> int:
        """How many live chunks ``within`` keeps, counted now (all of them for None)."""
        if within is not None and within.empty:
            return 0
        where, params = self._within_sql(within)
        return self._db.run(lambda c: c.execute(sql.SQL("SELECT count(*) FROM {t} WHERE true{w}").format(
            t=self._names["chunks"], w=where), params).fetchone()[0], what="count chunks")

    def chunks_within(self, within: Within | None) -> list[Chunk]:
        """The live chunks ``within`` keeps, by file and position (all of them for None)."""
        if within is None:
            return self.chunks
        if within.empty:
            return []
        where, params = self._within_sql(within)
        rows = self._db.run(lambda c: c.execute(sql.SQL(
            "SELECT chunk_id, doc_id, text, title, url, heading, source_path, page FROM {t} WHERE true{w} "
            "ORDER BY source_file, position").format(t=self._names["chunks"], w=where), params).fetchall(),
            what="read chunks")
        return [Chunk(*r) for r in rows]

    def file_dates(self) -> dict:
        """Corpus file -> its modification time when indexed (None for files indexed before it was
        recorded), read now from ``T_files``."""
        # to_jsonb: a files table made before the column existed answers too (null)
        rows = self._db.run(lambda c: c.execute(sql.SQL(
            "SELECT source_file, to_jsonb(f) ->> 'modified' FROM {t} f").format(t=self._names["files"])).fetchall(),
            what="read files")
        return {r[0]: file_time(r[1]) for r in rows}

    def select(self, flt: DocumentFilter | None) -> Within:
        """What ``flt`` leaves of this knowledge base (``program.retrieval.filters.select``)."""
        return select(flt, self.file_dates())

    def candidate_terms(self, question: str, n: int = 12) -> list[str]:
        """The knowledge base's own terms nearest to ``question`` by cosine similarity (exact
        search over ``T_terms``), for the query rewrite; see
        :meth:`program.retrieval.KnowledgeBase.candidate_terms`. ``[]`` for a blank question,
        ``n <= 0`` or a knowledge base indexed without its vocabulary."""
        if not question or not question.strip() or n <= 0:
            return []
        vector = np.asarray(self.embedder.encode([question])[0], dtype=np.float32)
        rows = self._db.run(lambda c: c.execute(sql.SQL(
            "SELECT term FROM {t} ORDER BY embedding <=> %s, position LIMIT %s").format(t=self._names["terms"]),
            [vector, n]).fetchall(), what="candidate terms")
        return [r[0] for r in rows]


def _generation(meta: dict) -> str:
    """A pgvector knowledge base's build identity: its generation counter and when it moved."""
    return f"{meta.get('generation', 0)}@{meta.get('updated') or meta.get('created')}"
