"""CRAG's knowledge correction (CRAG §4.3): search again, and write the answer again.

For the INCORRECT and AMBIGUOUS actions, one round: ``RewriteQuery`` in the knowledge base's
vocabulary, the knowledge base searched again with the question and the rewrite (fused by
rank) and the web when configured, what was found judged and read, and the answer written
again from it (AMBIGUOUS: with the draft's cited strips). The verdict keeps the answer of
higher confidence (``program.stages.verdict.chosen``).
"""

from __future__ import annotations

import dspy

from program.guards.cost import step
from program.retrieval.fusion import fuse_passages
from program.stages.decision import Decision, unmentioned_reason
from program.stages.draft import Draft
from program.stages.reader import Reader
from program.stages.retrieve import Retrieve
from program.stages.stale import is_set_aside
from program.stages.verdict import Corrected, chosen
from program.stages.web_path import WebSearcher
from program.types import Action, ChunkGrade, Correction, Passage, Trace


class Correct(dspy.Module):
    """``forward(question, passages, draft, decision, grades, trace, unknown) -> Corrected``.

    Args:
        retrieve: the route's ``Retrieve`` (its knowledge base, instruction filter and judges).
        reader: the route's ``Reader``.
        web_searcher: the ``WebSearcher`` (its ``RewriteQuery``; its backend None: no web).

    A question naming what the knowledge base never writes skips the correction when no web is
    configured: searching the same documents again cannot find the name (``Corrected.skipped``).
    """

    def __init__(self, retrieve: Retrieve, reader: Reader, web_searcher: WebSearcher):
        super().__init__()
        self.retrieve = retrieve
        self.reader = reader
        self.web_searcher = web_searcher

    def forward(self, question: str, passages: list[Passage], draft: Draft, decision: Decision,
                grades: list[ChunkGrade], trace: Trace, unknown: set[str] = frozenset()) -> Corrected:
        if draft.evidence.unmentioned and self.web_searcher.backend is None:
            skipped = f"{unmentioned_reason(draft.evidence.unmentioned)} and no web is configured: no correction"
            trace.note(skipped)
            return Corrected(skipped=skipped)
        correction = self.search_again(question, passages, trace)
        if not correction.strips:
            return Corrected(correction)
        kept = draft.cited_strips() if decision.action is Action.AMBIGUOUS else []
        again = self.reader(question=question, strips=kept + correction.strips, grades=grades + correction.grades,
                            trace=trace, name="generate", unknown=unknown)
        trace.note(f"draft {draft.confidence:.2f}, corrected answer {again.confidence:.2f}: kept the "
                   f"{'corrected answer' if chosen(draft, Corrected(correction, again)) is again else 'draft'}")
        return Corrected(correction, again)

    def search_again(self, question: str, passages: list[Passage], trace: Trace) -> Correction:
        """One round of search (§4.3): rewrite in the knowledge base's vocabulary, search the
        knowledge base again and the web, judge what was found. New knowledge-base passages are
        read as the draft's were (``Reader.read``); web pages are refined into strips
        (decompose-then-recompose pays where a page is long)."""
        settings = self.retrieve.settings
        terms = self.candidate_terms(question, trace)
        with step(trace, "rewrite") as cost:
            query = self.web_searcher.rewrite_query(question, terms)
            cost.notes = f"query={query!r}; candidate terms {terms}"
        trace.rewritten_query = query
        seen = {p.id for p in passages}
        with step(trace, "re-retrieve") as cost:
            # the rewrite adds to the question's results, never replaces them (fused by rank)
            found_kb = ([self.retrieve.knowledge_base.search(q, 2 * settings.k) for q in (question, query)]
                        if query != question else [])
            again = [p for p in fuse_passages(found_kb) if p.id not in seen][:settings.k]
            cost.notes = f"{len(again)} new knowledge-base passages"
        found = []
        if self.web_searcher.backend is not None:
            with step(trace, "web-search") as cost:
                web = self.web_searcher(question=question, query=query)
                trace.web.append(web.to_trace())
                cost.notes = web.summary()
            if web.error:
                trace.note(f"web path failed: {web.error}")
            found = web.passages
        new = self.retrieve.set_aside(again + found, trace)
        if not new:
            return Correction()
        grades = self.retrieve.evaluate(question, new, trace, "evaluate-corrected", stage="corrected")
        kept = [(p, g) for p, g in zip(new, grades) if not is_set_aside(g)]
        strips = self.reader.read(question, [p for p, _ in kept if p.source != "web"],
                                  [g for p, g in kept if p.source != "web"], trace, "refine-kb-corrected", "corrected")
        pages = [p for p, _ in kept if p.source == "web"]
        relevant = [g.passage_id for p, g in kept if p.source == "web" and g.score >= settings.upper]
        return Correction(strips + self.reader.refine(question, pages, relevant, trace, "refine-corrected",
                                                      "corrected"), grades)

    def candidate_terms(self, question: str, trace: Trace) -> list[str]:
        """The knowledge base's terms nearest the question (``candidate_terms``), without those
        that address the model or hold a URL; none when the knowledge base has no vocabulary."""
        terms = getattr(self.retrieve.knowledge_base, "candidate_terms", None)
        try:
            terms = list(terms(question)) if callable(terms) else []
        except Exception:  # the vocabulary is a help, never a reason to fail
            return []
        kept, set_aside = self.retrieve.instruction_filter.terms(terms)
        if set_aside:
            trace.note(f"set aside {len(set_aside)} candidate term(s) addressing the model: {set_aside}")
        return kept
