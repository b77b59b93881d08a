"""What the CRAG program needs from a knowledge base, whatever stores it.

Two backends implement it: :class:`program.retrieval.KnowledgeBase` (faiss, in a folder;
the default) and :class:`program.retrieval.postgres.PgVectorKnowledgeBase` (PostgreSQL with
pgvector). :func:`open_knowledge_base` picks one from a location.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from program.retrieval.index import KnowledgeBase
from program.types import Passage


@runtime_checkable
class KnowledgeBaseProtocol(Protocol):
    """A searchable, described set of chunks.

    * ``search(query, k, mode="hybrid")``: the top-``k`` :class:`Passage`, best first: by
      default the cosine ranking and a BM25 ranking fused by reciprocal rank
      (:mod:`program.retrieval.fusion`), ``mode="dense"`` or ``"lexical"`` for one of them;
      ``source="kb"``, ``score`` the cosine in [-1, 1] whatever the mode; ``[]`` for a blank
      query or ``k <= 0``.
    * ``search_batch(queries, k, mode="hybrid")``: one such list per query.
    * ``len(kb)``: number of chunks.
    * ``manifest``: dict with at least ``embedding`` (``model``, ``dimensions``),
      ``chunking``, ``index`` and ``files`` (corpus path -> sha256; the trained judges key
      their per-corpus thresholds on it).
    * ``candidate_terms(question, n)``: the knowledge base's own terms nearest to the question.
    * ``mentions(terms)``: the terms (lower-cased words) that some chunk holds, in either number
      (:mod:`program.retrieval.mentions`).

    Both backends also narrow to part of themselves (:mod:`program.retrieval.filters`):
    ``file_dates()`` (corpus file -> modification time when indexed), ``select(filter) -> Within``,
    ``within=`` on ``search``, ``search_batch`` and ``mentions``, ``count_within(within)`` and
    ``chunks_within(within)``; :class:`program.retrieval.scoped.ScopedKnowledgeBase` reads a knowledge
    base through a filter with this same contract.
    """

    manifest: dict

    def search(self, query: str, k: int = 3, mode: str = "hybrid") -> list[Passage]: ...

    def search_batch(self, queries: list[str], k: int = 3, mode: str = "hybrid") -> list[list[Passage]]: ...

    def candidate_terms(self, question: str, n: int = 12) -> list[str]: ...

    def mentions(self, terms) -> set[str]: ...

    def __len__(self) -> int: ...


def open_knowledge_base(location: str, embedder=None) -> KnowledgeBaseProtocol:
    """The knowledge base at ``location``: a ``postgresql://...?table=NAME`` URL (pgvector), or
    the folder of a saved faiss index.

    Raises:
        IndexNotFoundError: nothing was indexed there.
        KnowledgeBaseError: it was built with another embedding model or is unusable;
            ``KnowledgeBaseUnavailable`` when the database cannot be reached.
        ValueError: a malformed database URL.
    """
    return KnowledgeBase.connect(location, embedder)
