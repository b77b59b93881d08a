"""CRAG's web path for INCORRECT and AMBIGUOUS retrievals (CRAG §4.3, knowledge searching).

The question is rewritten into a search query in the sources' vocabulary (``RewriteQuery``,
given the knowledge base's own terms nearest to the question: ``KnowledgeBase.candidate_terms``);
the query goes to a search backend (``program.web``); hits outside the allowed sources are
dropped before anything is fetched; the pages of the remaining hits are fetched and their main
text extracted (``program.web.fetch``), unless the backend already returned the text (the
offline snapshot, Wikipedia); and each page becomes a ``Passage`` with ``source="web"``,
refined afterwards exactly like an internal passage. Any web failure is caught and reported
in the ``WebResult``: the program then answers from what it has, or abstains.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import dspy

from program.guards.caps import report_cap
from program.stages.events import emit
from program.text import clean_copy
from program.types import Passage
from program.web.base import SearchHit, WebSearchError
from program.web.config import WebConfig
from program.web.fetch import FetchError, Page, PageFetcher
from program.web.scope import DomainScope
from signatures import RewriteQuery


@dataclass
class WebResult:
    """What the web path did, for the answer and for the trace.

    Attributes:
        passages: the pages as web passages (to be refined).
        question: the question as asked; query: the rewritten search query (the question itself
            when the rewrite failed).
        backend: the backend's name.
        hits: every hit the backend returned: ``{"url", "title", "snippet", "in_scope"}``.
        dropped_by_scope: hits dropped by the allowed/blocked domains, before fetching.
        fetched: pages fetched: ``{"url", "final_url", "title", "chars", "truncated", "redirects", "cached"}``.
        fetch_failures: ``{"url", "error"}`` per page that could not be fetched or read (its
            search snippet is used instead, when it has one).
        error: why the web path gave nothing ("" when it gave passages).
    """

    passages: list[Passage] = field(default_factory=list)
    question: str = ""
    query: str = ""
    backend: str = ""
    hits: list[dict] = field(default_factory=list)
    dropped_by_scope: int = 0
    fetched: list[dict] = field(default_factory=list)
    fetch_failures: list[dict] = field(default_factory=list)
    error: str = ""

    def to_trace(self) -> dict:
        """The record for ``Trace.web``: everything but the passage texts (their ids instead)."""
        record = asdict(self)
        record["passages"] = [p.id for p in self.passages]
        return record

    def summary(self) -> str:
        """One line for the step's notes."""
        if self.error:
            return self.error
        return (f"query={self.query!r}; {len(self.hits)} hits, {self.dropped_by_scope} out of scope, "
                f"{len(self.fetched)} fetched, {len(self.fetch_failures)} failed; "
                f"passages={[p.url for p in self.passages]}")


class WebSearcher(dspy.Module):
    """Rewrite the question, search, scope, fetch, and return the pages as web passages.

    Args:
        backend: a search backend (``search(query, k) -> list[SearchHit]``), or None to disable
            the web (the result then carries the error "web search disabled").
        k: hits kept (in scope). When a domain scope is set, ``3 * k`` hits are asked for, so
            that dropping out-of-scope hits still leaves ``k``.
        max_chars: page text kept per hit before refinement (characters).
        config: fetch limits, safety and scope; default the backend's ``config`` attribute
            (backends built by ``program.web.registry`` carry one), else ``WebConfig()``.
        fetcher: a ``PageFetcher``; default one built from the config.

    Edge behaviour: a rewrite that comes back empty or unparseable falls back to the original
    question; no candidate terms (None) reach the rewrite as an empty list. A hit whose page
    cannot be fetched keeps its search snippet as its text (a snippet is the search engine's
    excerpt of that page); a hit with neither gives nothing.
    ``forward`` never raises for a web failure: ``WebResult.error`` says what went wrong.

    Example:
        >>> result = WebSearcher(OfflineSnapshotBackend(path))(question="In what country is Kharbin?")
        >>> result.query, [p.url for p in result.passages]
    """

    def __init__(self, backend=None, k: int = 2, max_chars: int = 3000, config: WebConfig | None = None,
                 fetcher: PageFetcher | None = None):
        super().__init__()
        self.rewrite = dspy.Predict(RewriteQuery)
        self.backend = backend
        self.k = k
        self.max_chars = max_chars
        self.config = config
        self.fetcher = fetcher

    def _config(self) -> WebConfig:
        config = self.config or getattr(self.backend, "config", None)
        return config if isinstance(config, WebConfig) else WebConfig()

    def rewrite_query(self, question: str, candidate_terms: list[str] | None = None) -> str:
        """``RewriteQuery`` at temperature 0: the question as a search query in the sources'
        vocabulary, given the knowledge base's ``candidate_terms`` nearest to it. Returns the
        question itself when the rewrite comes back empty or cannot be parsed."""
        inputs = {"question": question}
        if "candidate_terms" in self.rewrite.signature.input_fields:
            inputs["candidate_terms"] = list(candidate_terms or [])
        try:
            # the small model sometimes leaves DSPy's "[[ ## completed ## ]]" marker in the field
            written = self.rewrite(**inputs, config={"temperature": 0.0}).query
        except Exception:  # an unparseable rewrite must not cost the web path
            return question
        emit("rewrite", query=str(written))
        return clean_copy(written) or question

    def forward(self, question: str, candidate_terms: list[str] | None = None, query: str | None = None) -> WebResult:
        """Search for ``question``, rewritten by ``RewriteQuery`` with ``candidate_terms`` (the
        knowledge base's terms nearest to the question, ``KnowledgeBase.candidate_terms``; None:
        an empty list). With ``query`` (already rewritten, e.g. by CRAG's correction step, which
        also searches the knowledge base with it) no rewrite is made here. A ``web`` event
        reports what was found, or the error."""
        result = self._search(question, candidate_terms, query)
        emit("web", **{k: v for k, v in result.to_trace().items() if k not in ("question", "passages")})
        return result

    def _search(self, question: str, candidate_terms: list[str] | None, query: str | None) -> WebResult:
        if self.backend is None:
            return WebResult(question=question, query=query or "", error="web search disabled")
        name = getattr(self.backend, "name", "web")
        query = query or self.rewrite_query(question, candidate_terms)
        result = WebResult(question=question, query=query, backend=name)
        config = self._config()
        scope = DomainScope.from_config(config)
        try:
            hits = self.backend.search(result.query, 3 * self.k if scope.restricted else self.k)
        except WebSearchError as exc:  # names its backend already
            result.error = str(exc)
            return result
        except Exception as exc:  # any backend failure is a note in the trace, never a crash
            result.error = f"{name}: {exc}"
            return result
        in_scope, dropped = scope.split(hits)
        result.dropped_by_scope = len(dropped)
        result.hits = [{"url": h.url, "title": h.title, "snippet": h.snippet, "in_scope": h not in dropped}
                       for h in hits]
        if len(in_scope) > self.k:
            report_cap("web_pages", self.k, f"kept the first {self.k} of {len(in_scope)} in-scope hits")
        in_scope = in_scope[: self.k]
        if not hits:
            result.error = f"{name}: no results for {result.query!r}"
            return result
        if not in_scope:
            result.error = f"all {len(hits)} hits are outside the allowed sources ({len(dropped)} dropped by scope)"
            return result
        pages = self._fetch([h for h in in_scope if not h.content], config, scope)
        for i, hit in enumerate(in_scope):
            passage = self._passage(i, hit, pages.get(hit.url), result)
            if passage is not None:
                result.passages.append(passage)
        if not result.passages:
            reasons = "; ".join(f"{f['url']}: {f['error']}" for f in result.fetch_failures) or "no text in the hits"
            result.error = f"no usable web page ({reasons})"
        return result

    def _fetch(self, hits: list[SearchHit], config: WebConfig, scope: DomainScope) -> dict:
        if not hits:
            return {}
        fetcher = self.fetcher or PageFetcher(config, scope=scope)
        urls = list(dict.fromkeys(h.url for h in hits))
        return dict(zip(urls, fetcher.fetch_all(urls)))

    def _passage(self, i: int, hit: SearchHit, page: Page | FetchError | None, result: WebResult) -> Passage | None:
        text, title = hit.content, hit.title
        if isinstance(page, Page):
            text, title = page.text, hit.title or page.title
            result.fetched.append({"url": page.url, "final_url": page.final_url, "title": page.title,
                                   "chars": len(page.text), "truncated": page.truncated,
                                   "redirects": page.redirects, "cached": page.from_cache})
        elif isinstance(page, FetchError):
            text = hit.snippet
            result.fetch_failures.append({"url": hit.url, "error": page.reason,
                                          "snippet_used": bool(hit.snippet.strip())})
        text = (text or hit.snippet or "").strip()
        if not text:
            return None
        return Passage(id=hit.url or f"web-{i}", text=text[: self.max_chars], source="web", title=title, url=hit.url)
