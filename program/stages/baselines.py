"""The baselines CRAG is measured against, with the same LM and result type.

``ClosedBook`` answers without retrieval; ``VanillaRAG`` answers from the top-k retrieved
passages, trusting them as they come (the "RAG" row of CRAG's Table 1); ``LangGraphCRAG`` is
the CRAG most users build, LangGraph's "langgraph_crag" tutorial: binary grades, and a web
search whenever one passage fails.
"""

from __future__ import annotations

import dspy

from program.guards.cost import step
from program.guards.question import validate_question
from program.lm.configure import CRITIQUE_CONFIG
from program.stages.attribution import Attributor, cite
from program.stages.draft import ConfidenceModel, check_draft
from program.stages.events import emit
from program.stages.generation import AnswerGenerator
from program.types import Action, ChunkGrade, CRAGResult, Ending, Outcome, Passage, Strip, Trace
from program.web.base import WebSearchError
from program.web.config import WebConfig
from program.web.excerpt import query_excerpt
from program.web.scope import DomainScope
from signatures import AnswerClosedBook, GradeDocumentBinary, RewriteForWebSearch


def retrieve(knowledge_base, question: str, k: int) -> tuple[str, Trace, list[Passage]]:
    """A retrieval baseline's first step: the validated question, a new trace, and the top-``k``
    passages, the search timed as the trace's ``retrieve`` step.

    Raises:
        program.guards.question.QuestionError: an empty or over-long question.
    """
    question = validate_question(question)
    trace = Trace()
    with step(trace, "retrieve"):
        passages = knowledge_base.search(question, k)
    return question, trace, passages


class ClosedBook(dspy.Module):
    """Answer from the model's own knowledge (``AnswerClosedBook``), one LM call.

    Example:
        >>> ClosedBook()(question="Who wrote Dune?").answer
    """

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict(AnswerClosedBook)

    def forward(self, question: str) -> CRAGResult:
        question = validate_question(question)
        trace = Trace()
        with step(trace, "generate"):
            answer = str(self.answer(question=question).answer).strip()
        emit("answer", answer=answer, strict=False, closed_book=True)
        return CRAGResult(question=question, answer=answer, trace=trace, mode="closed",
                          outcome=Outcome(Ending.CLOSED_BOOK))


class VanillaRAG(dspy.Module):
    """Retrieve ``k`` passages and answer from them with ``GenerateAnswer``, one LM call.

    Each passage (cut to ``max_chars`` characters) is one numbered context entry. The answer
    carries a confidence from its own checks (``program.stages.draft``: the same checks and
    model as CRAG's draft, with no passage scores), which it reports and never acts on.

    ``generator``, ``judges`` and ``confidence`` let it share CRAG's compiled reader, support
    judge and confidence model (``program.app.factory``), so that the two differ only by CRAG's
    corrections; the defaults are uncompiled.

    Example:
        >>> VanillaRAG(kb, k=3)(question="Who wrote Dune?").citations
    """

    def __init__(self, knowledge_base, k: int = 3, max_chars: int = 1500, *, generator: AnswerGenerator | None = None,
                 judges=None, confidence: ConfidenceModel | None = None):
        super().__init__()
        self.knowledge_base = knowledge_base
        self.k = k
        self.max_chars = max_chars
        self.generator = generator or AnswerGenerator()
        self.attributor = Attributor(judges=judges)  # sets the citations (``program.stages.attribution``)
        self.confidence = confidence or ConfidenceModel()

    def forward(self, question: str) -> CRAGResult:
        question, trace, passages = retrieve(self.knowledge_base, question, self.k)
        strips = [Strip(p.id, 0, p.text[: self.max_chars], url=p.url, title=p.title, page=p.page) for p in passages]
        with step(trace, "generate"):
            answer, probability = self.generator.draft(question=question, strips=strips)
        confidence = self.confidence.score(check_draft(question, answer, strips, {}, probability))
        return cite(CRAGResult(question=question, answer=answer, strips=strips, trace=trace, mode="rag",
                               confidence=confidence), answer, self.attributor)


class LangGraphCRAG(dspy.Module):
    """The Corrective RAG of LangGraph's tutorial ("langgraph_crag"), the baseline most users build.

    Retrieve the top ``k`` passages; grade each one with ``GradeDocumentBinary`` (one yes/no
    relevance call per passage) and keep the "yes" ones; if any passage was graded "no",
    rewrite the question for web search (``RewriteForWebSearch``) and add, for each of the top
    ``web_k`` web hits, its extract for the rewritten query (``program.web.excerpt.query_excerpt``,
    as the tutorial's Tavily ``content`` is: the page's best-matching parts up to ``max_chars``);
    generate the answer from the kept passages plus the web texts with the
    shared ``AnswerGenerator`` (``GenerateAnswer``, the same generator as ``VanillaRAG``). It
    has none of CRAG's refinement, thresholds or fallback. Grading and rewriting run
    at temperature 0 (``CRITIQUE_CONFIG``); neither is compiled: the tutorial's prompts as written.

    Source: the LangGraph tutorial "Corrective RAG (CRAG)"
    (https://langchain-ai.github.io/langgraph/tutorials/rag/langgraph_crag/), whose nodes
    retrieve, grade_documents, transform_query, web_search_node and generate are the steps
    ``retrieve``, ``grade``, ``rewrite``, ``web-search`` and ``generate`` of the trace.

    Args:
        knowledge_base: object with ``search(query, k) -> list[Passage]`` (``program.retrieval.KnowledgeBase``).
        web: a search backend, ``search(query, k) -> list[program.web.base.SearchHit]`` (the
            offline snapshot fills ``content``, live engines the ``snippet``), or None (no web).
        k: passages retrieved and graded (default 3).
        web_k: web hits whose text is added (default 3, the tutorial's Tavily ``k``).
        max_chars: characters kept of each passage and of each hit's extract (default 1500).

    Returns (``forward(question)``): a ``CRAGResult`` with ``mode="langgraph"``; ``grades`` has
    one ``ChunkGrade`` per passage (1.0 ``relevant`` or 0.0 ``irrelevant``); ``action`` is the
    route, ``Action.CORRECT`` when every passage was graded yes (no web) and
    ``Action.INCORRECT`` when one was graded no (the web route); ``confidence`` the highest
    grade; ``strips`` the kept passages then the web texts (with their ``url``), as numbered
    for the generator; ``citations`` the strips the answer cites.

    Edge behaviour: grader output that cannot be parsed counts as "no" (LangGraph would retry
    the structured output; here the passage is dropped) and is noted in the trace. A rewrite
    that fails or comes back empty searches with the question itself. A web failure (any
    exception from the backend), no hits, or no backend is a trace note, never a crash: the
    answer is generated from the kept passages, or from no context at all when none was kept
    (the generator then says it does not know; there is no honest fallback). With no passage
    retrieved nothing is graded "no", so, as in the tutorial, the web is not searched and the
    action is CORRECT. Hits outside the backend config's allowed domains are dropped.
    ``forward`` raises only ``QuestionError``, for a bad question.

    Example:
        >>> program = LangGraphCRAG(kb, web=OfflineSnapshotBackend(path), k=3)
        >>> result = program(question="What is Herlyn Espinal's occupation?")
        >>> result.action, result.trace.rewritten_query, result.answer
    """

    def __init__(self, knowledge_base, web=None, k: int = 3, web_k: int = 3, max_chars: int = 1500, *,
                 generator: AnswerGenerator | None = None, judges=None):
        super().__init__()
        self.knowledge_base = knowledge_base
        self.web = web
        self.k, self.web_k, self.max_chars = k, web_k, max_chars
        self.grader = dspy.Predict(GradeDocumentBinary)
        self.rewriter = dspy.Predict(RewriteForWebSearch)
        self.generator = generator or AnswerGenerator()  # CRAG's compiled reader when shared (program.app.factory)
        self.attributor = Attributor(judges=judges)  # sets the citations (``program.stages.attribution``)

    def forward(self, question: str) -> CRAGResult:
        question, trace, passages = retrieve(self.knowledge_base, question, self.k)
        with step(trace, "grade") as cost:
            grades = [self._grade(question, p, trace) for p in passages]
            kept = [p for p, g in zip(passages, grades) if g.score == 1.0]
            cost.notes = f"{len(kept)} of {len(passages)} graded yes"
        if not passages:
            trace.note("no passage retrieved: nothing graded no, so no web search (as in the tutorial)")
        strips = [Strip(p.id, 0, p.text[: self.max_chars], url=p.url, title=p.title, page=p.page) for p in kept]
        web_route = len(kept) < len(passages)
        if web_route:
            strips += self._search_web(question, trace)
        action = Action.INCORRECT if web_route else Action.CORRECT
        trace.note(f"action={action.value}: {len(kept)} of {len(passages)} passages graded yes")
        if not strips:
            trace.note("no kept passage and no web text: generating from an empty context")
        with step(trace, "generate"):
            answer = self.generator(question=question, strips=strips)
        result = CRAGResult(question=question, answer=answer, action=action, grades=grades, strips=strips,
                            confidence=max((g.score for g in grades), default=0.0), trace=trace, mode="langgraph")
        return cite(result, answer, self.attributor)

    def _grade(self, question: str, passage: Passage, trace: Trace) -> ChunkGrade:
        try:
            relevant = self.grader(question=question, document=passage.text[: self.max_chars],
                                   config=CRITIQUE_CONFIG).relevant
        except Exception as exc:  # adapter parse failures surface as several exception types
            trace.note(f"grade {passage.id}: unparseable output ({type(exc).__name__}); counted as no")
            return ChunkGrade(passage.id, 0.0, "irrelevant", "unparseable grader output")
        if relevant is True:
            return ChunkGrade(passage.id, 1.0, "relevant", "binary grade: yes")
        return ChunkGrade(passage.id, 0.0, "irrelevant", "binary grade: no")

    def _rewrite(self, question: str, trace: Trace) -> str:
        with step(trace, "rewrite"):
            try:
                query = str(self.rewriter(question=question, config=CRITIQUE_CONFIG).query).strip()
            except Exception as exc:  # an unparseable rewrite must not cost the web search
                trace.note(f"rewrite: unparseable output ({type(exc).__name__}); searching with the question")
                return question
        emit("rewrite", query=query)
        return query or question

    def _search_web(self, question: str, trace: Trace) -> list[Strip]:
        if self.web is None:
            trace.note("a passage was graded no, but there is no web backend: answering from the kept passages")
            return []
        query = self._rewrite(question, trace)
        trace.rewritten_query = query
        name = getattr(self.web, "name", "web")
        record = {"question": question, "query": query, "backend": name, "hits": [], "error": ""}
        trace.web.append(record)
        with step(trace, "web-search") as cost:
            try:
                hits = list(self.web.search(query, self.web_k))
            except Exception as exc:  # any backend failure is a note in the trace, never a crash
                named = isinstance(exc, WebSearchError)  # its message names the backend already
                record["error"] = str(exc) if named else f"{name}: {type(exc).__name__}: {exc}"
                cost.notes = record["error"]
                trace.note(f"web search failed: {record['error']}; answering from the kept passages")
                return []
            hits = _in_scope(self.web, hits)[: self.web_k]
            record["hits"] = [{"url": h.url, "title": h.title, "snippet": h.snippet} for h in hits]
            # what the tutorial's search tool returns: each page's extract for the query (Tavily's content)
            strips = [Strip(h.url or f"web-{i}", 0, text, url=h.url, title=h.title) for i, h in enumerate(hits)
                      if (text := query_excerpt(query, h.snippet, h.content, self.max_chars))]
            cost.notes = f"query={query!r}; {len(hits)} hits, {len(strips)} with text"
        if not strips:
            record["error"] = f"{name}: no usable results for {query!r}"
            trace.note(f"web search gave nothing: {record['error']}")
        return strips


def _in_scope(backend, hits: list) -> list:
    """The hits inside the backend config's allowed domains (all of them without a domain scope)."""
    config = getattr(backend, "config", None)
    scope = DomainScope.from_config(config) if isinstance(config, WebConfig) else None
    return scope.split(hits)[0] if scope is not None and scope.restricted else hits
