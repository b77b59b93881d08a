"""The reader: what it reads of the passages, and one answer written from them with its checks.

``Reader.read`` gives the context the reader reads: the passages as plain RAG reads them, or
with ``refine_passages`` their refined strips (decompose-then-recompose, CRAG §4.4).
``Reader.forward`` writes one answer over that context (the one call plain RAG makes), with
the answer's token probabilities from the same call, and checks it (``program.stages.draft``):
a ``Draft`` with its confidence.
"""

from __future__ import annotations

import dspy
from dspy.utils.exceptions import AdapterParseError

from program.guards.cost import step
from program.lm.continuation import recorded_reading
from program.stages.draft import ConfidenceModel, Draft, DraftEvidence, check_draft
from program.stages.generation import AnswerGenerator
from program.stages.refine import KnowledgeRefiner
from program.stages.settings import CRAGSettings
from program.stages.stale import is_set_aside
from program.types import ChunkGrade, Passage, Strip, Trace

# What DSPy raises for output it cannot parse (several types); a failing LM service, a cap or a
# cancellation are not among them and still end the question.
UNREADABLE_OUTPUT = (AdapterParseError, ValueError, KeyError, TypeError, AttributeError)


class Reader(dspy.Module):
    """Read passages and write an answer: ``forward(question, strips, grades, trace, name, unknown) -> Draft``.

    Args:
        generator: the reader's ``AnswerGenerator`` (the compiled one in the program).
        refiner: the strip judge's ``KnowledgeRefiner``.
        confidence: the ``ConfidenceModel`` that scores an answer's checks.
        settings: ``refine_passages``, ``upper``, ``max_chars`` and ``continue_reading`` are read.
    """

    def __init__(self, generator: AnswerGenerator, refiner: KnowledgeRefiner, confidence: ConfidenceModel,
                 settings: CRAGSettings):
        super().__init__()
        self.generator = generator
        self.refiner = refiner
        self.confidence = confidence
        self.settings = settings

    def forward(self, question: str, strips: list[Strip], grades: list[ChunkGrade], trace: Trace,
                name: str = "draft", unknown: set[str] = frozenset()) -> Draft:
        """One generation over ``strips`` and its checks, in the step ``name``: a ``Draft`` with
        its confidence (``unknown``: the question's names the knowledge base never mentions).
        No strips: an abstaining draft of confidence 0, no LM call."""
        if not strips:
            return Draft("", [], DraftEvidence(abstained=True), 0.0)
        with step(trace, name) as cost, recorded_reading() as record:
            try:
                answer, probability = self.generator.draft(question=question, strips=strips)
            except UNREADABLE_OUTPUT as exc:  # what the reader wrote cannot be parsed: no answer
                answer, probability = "", None
                trace.note(f"{name}: unparseable output ({type(exc).__name__}); no answer written")
            scores = {g.passage_id: g.score for g in grades}
            evidence = check_draft(question, answer, strips, scores, probability, unknown)
            confidence = self.confidence.score(evidence)
            cost.notes = f"confidence {confidence:.2f}; {evidence.summary()}"
        # one parsed call: the claim check may continue it (program.lm.continuation)
        reading = record.reading if record.calls == 1 and answer else None
        return Draft(answer, strips, evidence, confidence, reading if self.settings.continue_reading else None)

    def read(self, question: str, passages: list[Passage], grades: list[ChunkGrade], trace: Trace,
             name: str = "refine", stage: str = "internal") -> list[Strip]:
        """What the reader reads of knowledge-base ``passages``: the passages whole, or with
        ``refine_passages`` their refined strips, none when no strip is kept (CRAG's
        *incorrect*: a strip judge that keeps an answering strip for nine questions in ten
        that have one found nothing here, so no draft is written from them)."""
        whole = self.as_read(passages, grades)
        if not self.settings.refine_passages or not whole:
            return whole
        usable = [(p, g) for p, g in zip(passages, grades) if not is_set_aside(g)]
        relevant = [g.passage_id for _, g in usable if g.score >= self.settings.upper]
        strips = self.refine(question, [p for p, _ in usable], relevant, trace, name, stage)
        if not strips:
            trace.note(f"{name}: no strip of the passages is kept; nothing to read from them")
        return strips

    def as_read(self, passages: list[Passage], grades: list[ChunkGrade]) -> list[Strip]:
        """The passages as plain RAG reads them, one context entry each (cut to ``max_chars``),
        without those set aside as stale."""
        return [Strip(p.id, 0, p.text[: self.settings.max_chars], url=p.url, title=p.title, page=p.page)
                for p, g in zip(passages, grades) if not is_set_aside(g)]

    def refine(self, question: str, passages: list[Passage], relevant_ids: list[str], trace: Trace, name: str,
               stage: str = "internal") -> list[Strip]:
        """Decompose-then-recompose (CRAG §4.4): the strips of ``passages`` the strip judge keeps."""
        if not passages:
            return []
        with step(trace, name) as cost:
            report = self.refiner(question=question, passages=passages, relevant_ids=relevant_ids, stage=stage)
            cost.notes = report.note
        return report.kept
