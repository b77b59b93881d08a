"""Retrieval and the retrieval evaluator, the first step of CRAG's route (CRAG §4.2).

``Retrieve`` searches the knowledge base, sets aside the sentences that address the model
(``program.stages.instructions``) and grades what is left with the cheap judges (no LM call),
setting aside stale passages. It also names what the question asks about that the knowledge
base never writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import dspy

from program.guards.cost import step
from program.question import parsed
from program.stages.decision import unmentioned_reason
from program.stages.evaluator import RetrievalEvaluator
from program.stages.instructions import InstructionFilter
from program.stages.settings import CRAGSettings
from program.stages.stale import is_set_aside, set_aside_stale
from program.types import ChunkGrade, Passage, Trace


@dataclass(frozen=True)
class Retrieved:
    """What retrieval found for one question.

    Attributes:
        passages: the top ``k`` passages, the sentences addressing the model set aside.
        grades: one ``ChunkGrade`` per passage, in order (stale ones set aside).
        unknown: the question's names and years the knowledge base never writes, and its spans
            into the future (``asked_names``, ``asked_times``).
    """

    passages: list[Passage]
    grades: list[ChunkGrade]
    unknown: set[str] = field(default_factory=set)

    def best_score(self) -> float:
        """The best score of a passage not set aside; -1.0 when there is none."""
        return max((g.score for g in self.grades if not is_set_aside(g)), default=-1.0)


class Retrieve(dspy.Module):
    """Search, set aside, grade: ``forward(question, trace) -> Retrieved``.

    Args:
        knowledge_base: ``search(query, k) -> list[Passage]``; with ``mentions(terms)`` too, the
            question's names it never writes are found.
        evaluator: the retrieval evaluator (its trained passage judge, when there is one).
        instruction_filter: sets aside sentences that address the model.
        settings: ``k``, ``lower`` and ``upper`` are read.
    """

    def __init__(self, knowledge_base, evaluator: RetrievalEvaluator, instruction_filter: InstructionFilter,
                 settings: CRAGSettings):
        super().__init__()
        self.knowledge_base = knowledge_base
        self.evaluator = evaluator
        self.instruction_filter = instruction_filter
        self.settings = settings

    def forward(self, question: str, trace: Trace) -> Retrieved:
        with step(trace, "retrieve"):
            passages = self.knowledge_base.search(question, self.settings.k)
        passages = self.set_aside(passages, trace)
        unknown = self.unknown_names(question, trace)
        return Retrieved(passages, self.evaluate(question, passages, trace, "evaluate"), unknown)

    def set_aside(self, passages: list[Passage], trace: Trace) -> list[Passage]:
        """``passages`` without their sentences addressing the model (not knowledge: out before
        any judge reads them); each sentence set aside is a trace note."""
        out = self.instruction_filter(passages=passages)
        for passage_id, sentence in out.removed:
            trace.note(f"{passage_id}: set aside a sentence addressing the model: {sentence[:200]!r}")
        return out.passages

    def evaluate(self, question: str, passages: list[Passage], trace: Trace, name: str,
                 stage: str = "initial") -> list[ChunkGrade]:
        """The cheap judges' grades of ``passages`` (an LM grade per passage costs what the whole
        draft costs), stale passages set aside; ``stage`` names the retrieval in the events."""
        with step(trace, name) as cost:
            grades = self.evaluator(question=question, passages=passages, lower=self.settings.lower,
                                    upper=self.settings.upper, ask_lm=False, stage=stage)
            grades = set_aside_stale(passages, grades, self.settings.lower)
            cost.notes = "; ".join(f"{g.passage_id}={g.score} {g.reason}" for g in grades)
        for g in grades:
            if is_set_aside(g):
                trace.note(f"{g.passage_id}: {g.explanation}")
        return grades

    def unknown_names(self, question: str, trace: Trace) -> set[str]:
        """The question's names (``asked_names``) and years that the knowledge base never writes,
        and its spans into the future (``asked_times``: the passages may still write them)."""
        question = parsed(question)
        asked = question.asked_names | question.asked_times
        mentions = getattr(self.knowledge_base, "mentions", None)  # a bare search-only object mentions all
        if not asked or mentions is None:
            return set()
        unknown = asked - set(mentions({a for a in asked if " " not in a}))
        if unknown:
            trace.note(unmentioned_reason(sorted(unknown)))
        return unknown
