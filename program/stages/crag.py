"""The CRAG program: Corrective RAG (Yan et al. 2024) with Self-RAG's support checks (Asai et al. 2023).

``CRAG.forward`` is the route, one small module per step (``retrieve``, ``reader``, ``correct``,
``claim_check``; ``decision.decide`` and ``verdict.verdict`` are pure functions), each emitting
its own events (``program.stages.events``). The compiled predictors live on ``CRAG`` itself, so
their names in ``compiled/crag.json`` (``generator.generate``, ...) stay put; the steps borrow them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import dspy

from program.guards.caps import CapReached, QuestionCaps, guarded
from program.guards.cost import step
from program.guards.question import validate_question
from program.judges.store import route_report
from program.lm.adapter import inputs_as_data
from program.lm.continuation import RecordingChatAdapter
from program.question import parsed
from program.retrieval.filters import DocumentFilter
from program.stages.attribution import Attributor
from program.stages.claim_check import ClaimCheck
from program.stages.correct import Correct
from program.stages.decision import Decision, decide
from program.stages.draft import ConfidenceModel, Draft
from program.stages.evaluator import RetrievalEvaluator
from program.stages.events import emit
from program.stages.followup import FollowUp
from program.stages.generation import AnswerGenerator
from program.stages.instructions import InstructionFilter
from program.stages.reader import Reader
from program.stages.refine import KnowledgeRefiner
from program.stages.retrieve import Retrieve, Retrieved
from program.stages.retrieve_or_not import RetrieveOrNot
from program.stages.scope import no_documents, scoped, scoped_state, with_filter
from program.stages.selfcheck import ClaimChecker
from program.stages.settings import CRAGSettings
from program.stages.usefulness import UsefulnessJudge
from program.stages.verdict import Corrected, Verdict, chosen, verdict
from program.stages.web_path import WebSearcher
from program.types import FALLBACK_ANSWER, Action, ChunkGrade, CRAGResult, Ending, Outcome, Strip, Trace
from signatures import AnswerClosedBook, DecideRetrieval


class CRAG(dspy.Module):
    """Corrective RAG with the reader's draft as evidence and a claim-level self-check, as one DSPy module.

    Args:
        knowledge_base: object with ``search(query, k) -> list[Passage]`` (``program.retrieval.KnowledgeBase``);
            with ``mentions(terms)`` too, a question about a name it never writes is declined.
        web: a search backend for the INCORRECT and AMBIGUOUS actions, or None (no web).
        embedder: used by the refiner to pre-filter web strips; None grades every strip.
        judges: a ``program.judges.JudgeSet`` (``load_compiled`` loads the compiled one); None
            scores passages by retrieval similarity and judges strips and claims with the LM.
        confidence: the ``ConfidenceModel`` that scores an answer's checks; the default when None.
        settings: ``CRAGSettings`` (k, thresholds, operating point, claim check, retries,
            retrieve-or-not, caps, ...); the defaults when None.
        **overrides: instead of ``settings``, its fields by name (``CRAG(kb, k=5, self_check=False)``).

    Raises:
        ValueError: a setting out of its range (``CRAGSettings``).
        TypeError: a keyword that names no setting, or both ``settings`` and fields.

    The route (CRAG §4.3, with the draft as evidence) is ``_route``, one step a line. A question
    that reaches a cap (``program.guards.caps``) stops with the fallback. ``forward`` raises
    only ``QuestionError`` for a bad question and ``program.lm.retry.LMServiceError`` when the
    LM service failed after its capped retries.
    """

    def __init__(self, knowledge_base, web=None, *, embedder=None, judges=None,
                 confidence: ConfidenceModel | None = None, settings: CRAGSettings | None = None,
                 sources: dict[str, str] | None = None, **overrides):
        super().__init__()
        self.settings = settings = CRAGSettings.given(settings, overrides)  # never a merge: resolve() merges
        self.sources = dict(sources or {})  # where each resolved value came from (ProgramConfig.sources)
        caps = settings.caps
        self.question_caps = caps or QuestionCaps.from_env()  # read once, here: every question is held to them
        self.knowledge_base = knowledge_base
        self.embedder = embedder
        self.confidence = confidence or ConfidenceModel()
        # the compiled predictors, under the names compiled/crag.json keeps (assigned before the steps)
        self.decider = dspy.Predict(DecideRetrieval) if settings.decide_retrieval else None
        self.closed_book = dspy.Predict(AnswerClosedBook) if settings.decide_retrieval else None
        self.evaluator = RetrievalEvaluator(judges=judges, probabilities=settings.probabilities)
        self.instruction_filter = InstructionFilter()
        self.refiner = KnowledgeRefiner(embedder, max_strips=caps.strips if caps else 4, judges=judges)
        self.web_searcher = WebSearcher(web, k=caps.web_pages if caps else settings.web_k)
        self.followup = FollowUp()
        self.generator = AnswerGenerator()
        self.checker = ClaimChecker(max_claims=caps.claims if caps else 8, judges=judges)
        self.usefulness = UsefulnessJudge(judges=judges)
        self.attributor = Attributor(judges=judges)
        # the route's steps
        self.retrieve_or_not = RetrieveOrNot(self.decider, self.closed_book)
        self.retrieve = Retrieve(knowledge_base, self.evaluator, self.instruction_filter, settings)
        self.reader = Reader(self.generator, self.refiner, self.confidence, settings)
        self.correct = Correct(self.retrieve, self.reader, self.web_searcher)
        self.claim_check = ClaimCheck(self.checker, self.generator, self.usefulness, settings)

    def narrowed(self, settings: CRAGSettings, *, web: bool = True, documents: DocumentFilter | None = None) -> "CRAG":
        """A new ``CRAG`` with ``settings`` (no web when ``web`` is False), reading only ``documents``
        (``program.stages.scope``), around the same parts and compiled state, as one request runs it."""
        view = CRAG(kb := scoped(self.knowledge_base, documents), web=self.web_searcher.backend if web else None,
                    embedder=self.embedder, judges=self.judges, confidence=self.confidence, settings=settings,
                    sources=self.sources)
        compiled = dict(self.named_predictors())
        for name, predictor in view.named_predictors():
            if name in compiled:
                predictor.load_state(scoped_state(name, compiled[name].dump_state(), kb))
        return view

    @property
    def judges(self):  # the trained judges (program.judges.JudgeSet) the steps were built with, or None
        return self.evaluator.judges

    def judges_report(self) -> dict:  # who decides each judgment in this route
        return route_report(self.judges)

    @property
    def decide_retrieval(self) -> bool:
        """True when ``forward`` first asks whether the question needs retrieval at all."""
        return self.settings.decide_retrieval and self.decider is not None

    @property
    def mode(self) -> str:
        """The evaluation mode this program plays: ``self-crag`` with the claim check, else ``crag``."""
        return "self-crag" if self.settings.self_check else "crag"

    def forward(self, question: str, history: Sequence[tuple[str, str]] = ()) -> CRAGResult:
        """Answer ``question``; ``history`` is the conversation before it (``(role, text)`` pairs,
        ``user`` or ``assistant``, oldest first), whose follow-up is first rewritten into a
        standalone question (``program.stages.followup``; ``result.asked`` keeps the user's words)."""
        emit("question", question=question)
        asked = validate_question(question)
        trace = Trace(judges=self.judges_report())
        with guarded(self.question_caps) as guard, inputs_as_data(RecordingChatAdapter):
            try:
                question = parsed(self.followup.standalone(asked, history, trace))  # parsed once, read by every step
                result = self._route(question, trace)
            except CapReached as cap:  # bounded work (program.guards.caps): stop with the honest fallback
                trace.note(f"stopped: {cap}; honest fallback")
                result = CRAGResult(question=asked, answer=FALLBACK_ANSWER, trace=trace, mode=self.mode,
                                    outcome=Outcome(Ending.STOPPED, f"stopped: {cap}"))
            finally:
                trace.caps_hit.extend(guard.caps_hit)
        result = with_filter(result, self.knowledge_base)  # which documents it could read
        return replace(result, asked=asked) if result.question != asked else result

    def _route(self, question: str, trace: Trace) -> CRAGResult:
        """Retrieve or not (Self-RAG §3.1); retrieve and grade (CRAG §4.2); draft; decide the action
        with the draft as evidence (§4.3); correct unless CORRECT (§4.3); check the kept answer's
        claims (Self-RAG's IsSup, IsUse); the verdict declines or answers; cite."""
        web = self.web_searcher.backend is not None  # a filter that keeps no document: said so, not judged
        ended = no_documents(self.knowledge_base, question, trace, self.mode, web) or self.retrieve_or_not(
            question=question, trace=trace, mode=self.mode)
        if ended is not None:
            return ended
        found = self.retrieve(question=question, trace=trace)
        strips = self.reader.read(question, found.passages, found.grades, trace)
        draft = self.reader(question=question, strips=strips, grades=found.grades, trace=trace, unknown=found.unknown)
        decision = self._decide(draft, found, trace)
        corrected = None if decision.action is Action.CORRECT else self.correct(
            question=question, passages=found.passages, draft=draft, decision=decision, grades=found.grades,
            trace=trace, unknown=found.unknown)
        checked = self.claim_check(question=question, answer=chosen(draft, corrected), trace=trace)
        outcome = verdict(draft, decision, corrected, checked, self.settings)
        return self._result(question, outcome, draft, found.grades, corrected, trace)

    def _decide(self, draft: Draft, found: Retrieved, trace: Trace) -> Decision:
        """CRAG's action for the draft (``decide``), in a ``decide`` step and an ``action`` event."""
        settings = self.settings
        with step(trace, "decide") as cost:
            decision = decide(draft.evidence, draft.confidence, found.best_score(), settings.accept, settings.lower)
            cost.notes = decision.summary()
        emit("action", action=decision.action, confidence=round(decision.confidence, 4), reasons=decision.reasons,
             accept=settings.accept, lower=settings.lower)
        trace.note(decision.summary())
        return decision

    def _result(self, question: str, outcome: Verdict, draft: Draft, grades: list[ChunkGrade],
                corrected: Corrected | None, trace: Trace) -> CRAGResult:
        """The ``CRAGResult`` of ``outcome``, built once: the answer cited when one is given."""
        trace.note(outcome.note())
        cited = None
        if not outcome.fallback:
            with step(trace, "cite") as cost:
                cited = self.attributor(question=question, answer=outcome.answer, strips=outcome.strips)
                cost.notes = cited.summary()
        return outcome.result(question, draft, grades, corrected, cited, trace, self.mode)

    def draft_context(self, question: str, trace: Trace | None = None) -> tuple[list[Strip], list[ChunkGrade]]:
        """``(strips, grades)``: what the draft reads for ``question``, as ``forward`` reads it (no LM
        call): for tools that score drafts outside it (the operating point, the confidence rows)."""
        trace = trace if trace is not None else Trace()
        found = self.retrieve(question=question, trace=trace)
        return self.reader.read(question, found.passages, found.grades, trace), found.grades
