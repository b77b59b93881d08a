"""The documents one question may read, as the route sees them: the filter noted, "no documents
match" when it keeps none, and the reader's demos cut to what it keeps.

The knowledge base itself is narrowed by ``program.retrieval.scoped.ScopedKnowledgeBase``; this
module is what ``CRAG`` does about it (``CRAG.narrowed``, ``CRAG._route``, ``CRAG.forward``).
"""

from __future__ import annotations

from dataclasses import replace

from program.retrieval.filters import NO_MATCH_ANSWER, DocumentFilter
from program.retrieval.scoped import ScopedKnowledgeBase
from program.stages.events import emit
from program.text import coverage
from program.types import CRAGResult, Ending, Outcome, Trace

READER = "generator.generate"  # the reader's compiled predictor, whose demos are documents' text
HELD = 0.8  # share of a demo answer's content words its question's top passage must write


def held_by(kb, demo) -> bool:
    """True when ``kb`` holds ``demo`` (a reader demo: ``question``, ``answer``): the top passage
    it retrieves for the demo's question writes ``HELD`` of the content words of the demo's answer."""
    top = kb.search(str(demo["question"]), 1)
    return bool(top) and coverage(str(demo["answer"]), top[0].text) >= HELD


def scoped(knowledge_base, documents: DocumentFilter | None):
    """``knowledge_base`` read through ``documents`` (itself for None).

    Raises:
        TypeError: a filter for a knowledge base that cannot filter (a bare ``search`` object)."""
    if documents is None:
        return knowledge_base
    if not hasattr(knowledge_base, "select"):
        raise TypeError(f"{type(knowledge_base).__name__} cannot read part of itself: filters need a faiss or "
                        "PostgreSQL knowledge base (program.retrieval)")
    return ScopedKnowledgeBase(knowledge_base, documents)


def scoped_state(name: str, state: dict, knowledge_base) -> dict:
    """A compiled predictor's ``state`` (``dump_state``) as a scoped question loads it: the
    reader's (``READER``) with only the demos ``knowledge_base`` holds, since a compiled or adapted
    demo written from a document outside the scope would put that document in the prompt."""
    if name != READER or not isinstance(knowledge_base, ScopedKnowledgeBase):
        return state
    held = [d for d in state.get("demos", []) if not knowledge_base.empty and held_by(knowledge_base, d)]
    return {**state, "demos": held}


def no_documents(knowledge_base, question: str, trace: Trace, mode: str, web: bool) -> CRAGResult | None:
    """For a scoped knowledge base: the filter noted in ``trace`` (and a ``filter`` event), that
    the web (when ``web``) is not filtered, and the "no documents match" result when the filter
    keeps no chunk; None otherwise (and for an unscoped knowledge base)."""
    if not isinstance(knowledge_base, ScopedKnowledgeBase):
        return None
    flt, within = knowledge_base.filter, knowledge_base.within
    trace.note(f"filter: {flt.describe()}")
    emit("filter", filter=flt.to_dict(), files=None if within.files is None else len(within.files))
    if web:
        trace.note("the web search is not filtered: web pages may be read")
    if not knowledge_base.empty:
        return None
    return CRAGResult(question=question, answer=f"{NO_MATCH_ANSWER}: {flt.describe()}.", trace=trace, mode=mode,
                      outcome=Outcome(Ending.NO_DOCUMENTS, f"no documents match the filter ({flt.describe()})"))


def with_filter(result: CRAGResult, knowledge_base) -> CRAGResult:
    """``result`` saying which documents it could read (``CRAGResult.filter``)."""
    if not isinstance(knowledge_base, ScopedKnowledgeBase):
        return result
    return replace(result, filter=knowledge_base.filter.to_dict())


__all__ = ["HELD", "READER", "held_by", "no_documents", "scoped", "scoped_state", "with_filter"]
