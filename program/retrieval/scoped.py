"""A knowledge base narrowed to what one question may read: a request's filter, a key's scope, or both.

CRAG reads a knowledge base in four places: the search (CRAG §4.2, and again with the rewritten
query, §4.3), the vocabulary offered to the query rewrite (``candidate_terms``), the names it
checks the knowledge base writes (``mentions``), and its chunks. :class:`ScopedKnowledgeBase`
answers all four from the kept documents only, inside the backend's search
(``program.retrieval.filters.Within``), so a term, a name or a passage of a document outside
the scope never reaches the reader, the judges or the answer.
"""

from __future__ import annotations

from program.retrieval.filters import DocumentFilter, Within
from program.types import Passage

TERMS_FETCHED = 4  # vocabulary terms fetched per term wanted: the others may fall outside the scope


class ScopedKnowledgeBase:
    """``base`` read through ``filter``; the knowledge base contract of ``program.retrieval.protocol``.

    Args:
        base: a faiss ``KnowledgeBase`` or a ``PgVectorKnowledgeBase`` (with ``select``,
            ``search(..., within=)``, ``mentions(..., within=)``, ``count_within`` and ``chunks_within``).
        filter: what may be read (a request's filter intersected with its key's scope).

    Attributes:
        within: the corpus files and pages ``filter`` keeps, resolved once, when the question starts.
    """

    def __init__(self, base, filter: DocumentFilter):
        self.base, self.filter = base, filter
        self.within: Within = base.select(filter)
        self._count: int | None = None

    # ------------------------------------------------------------------ what stays the base's
    @property
    def manifest(self) -> dict:
        return self.base.manifest

    @property
    def embedder(self):
        return self.base.embedder

    def state(self, namespace: str):
        return self.base.state(namespace)

    # ------------------------------------------------------------------ narrowed
    @property
    def chunks(self):
        """The kept chunks (what adapting or a demo would read)."""
        return self.base.chunks_within(self.within)

    def __len__(self) -> int:
        if self._count is None:
            self._count = self.base.count_within(self.within)
        return self._count

    @property
    def empty(self) -> bool:
        """True when the filter keeps no chunk: the question is answered "no documents match"."""
        return len(self) == 0

    def search(self, query: str, k: int = 3, mode: str = "hybrid", **kwargs) -> list[Passage]:
        """The base's search among the kept chunks only (the filtered top ``k``)."""
        return self.base.search(query, k, mode, within=self.within, **kwargs)

    def search_batch(self, queries: list[str], k: int = 3, mode: str = "hybrid", **kwargs) -> list[list[Passage]]:
        return self.base.search_batch(queries, k, mode, within=self.within, **kwargs)

    def mentions(self, terms) -> set[str]:
        """The ``terms`` some kept chunk holds."""
        return self.base.mentions(terms, within=self.within)

    def candidate_terms(self, question: str, n: int = 12) -> list[str]:
        """The base's terms nearest to ``question`` whose every word a kept chunk holds, up to ``n``:
        a heading or key phrase of a document outside the scope is not offered to the rewrite."""
        terms = self.base.candidate_terms(question, TERMS_FETCHED * n) if n > 0 else []
        words = {w for t in terms for w in t.lower().split()}
        held = self.mentions(words)
        return [t for t in terms if all(w in held for w in t.lower().split())][:n]

    def __repr__(self) -> str:
        return f"ScopedKnowledgeBase({self.base!r}, {self.filter.describe()!r})"


__all__ = ["ScopedKnowledgeBase"]
