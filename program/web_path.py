"""CRAG's web path for INCORRECT and AMBIGUOUS retrievals (CRAG §4.3, knowledge searching).

The question is rewritten into a search query in the sources' vocabulary (``RewriteQuery``),
the query goes to a search backend (``program.web.SearchBackend``), and each hit becomes a
``Passage`` with ``source="web"`` that is then refined like any internal passage. Any web
failure is caught and reported: the program then answers from what it has, or abstains.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

from program.types import Passage
from program.web.base import WebSearchError
from signatures import RewriteQuery


@dataclass
class WebResult:
    """What the web path found: passages, the query it searched, and what went wrong."""

    passages: list[Passage] = field(default_factory=list)
    query: str = ""
    error: str = ""


class WebSearcher(dspy.Module):
    """Rewrite the question, search the backend, return the hits as web passages.

    Args:
        backend: a search backend (``search(query, k) -> list[SearchHit]``), or None to
            disable the web (the result then carries the error "web search disabled").
        k: hits to keep.
        max_chars: page text kept per hit before refinement (characters).

    A rewrite that comes back empty or unparseable falls back to the original question.

    Example:
        >>> result = WebSearcher(OfflineSnapshotBackend(path))(question="In what country is Kharbin?")
    """

    def __init__(self, backend=None, k: int = 2, max_chars: int = 3000):
        super().__init__()
        self.rewrite = dspy.Predict(RewriteQuery)
        self.backend = backend
        self.k = k
        self.max_chars = max_chars

    def forward(self, question: str) -> WebResult:
        if self.backend is None:
            return WebResult(error="web search disabled")
        try:
            query = str(self.rewrite(question=question, config={"temperature": 0.0}).query).strip() or question
        except Exception:
            query = question
        try:
            hits = self.backend.search(query, self.k)
        except WebSearchError as exc:  # names its backend already
            return WebResult(query=query, error=str(exc))
        except Exception as exc:  # any backend failure is a note in the trace, never a crash
            return WebResult(query=query, error=f"{getattr(self.backend, 'name', 'web')}: {exc}")
        passages = [
            Passage(id=h.url or f"web-{i}", text=(h.content or h.snippet)[: self.max_chars], source="web",
                    title=h.title, url=h.url)
            for i, h in enumerate(hits)
            if (h.content or h.snippet).strip()
        ]
        return WebResult(passages=passages, query=query, error="" if passages else "no usable web results")
