"""Self-RAG's Retrieve token before CRAG's route (Asai et al. 2023, §3.1), when it is turned on.

``RetrieveOrNot`` asks ``DecideRetrieval`` whether the question needs sources; only a parsed
"no" skips retrieval, and the question is then answered closed-book (``AnswerClosedBook``):
skipping a question that needed sources costs an ungrounded answer, retrieving for chit-chat
a few calls.
"""

from __future__ import annotations

import dspy

from program.guards.cost import step
from program.lm.configure import CRITIQUE_CONFIG
from program.stages.events import emit
from program.types import CRAGResult, Ending, Outcome, Trace


class RetrieveOrNot(dspy.Module):
    """``forward(question, trace, mode) -> CRAGResult | None``: the closed-book result when no
    retrieval is needed, else None (the route goes on).

    Args:
        decider: the ``DecideRetrieval`` predictor; None turns the question off (always retrieve).
        closed_book: the ``AnswerClosedBook`` predictor.
    """

    def __init__(self, decider: dspy.Predict | None, closed_book: dspy.Predict | None):
        super().__init__()
        self.decider = decider
        self.closed_book = closed_book

    def forward(self, question: str, trace: Trace, mode: str) -> CRAGResult | None:
        if self.decider is None or self.needs_retrieval(question, trace):
            return None
        with step(trace, "answer-closed-book"):
            answer = str(self.closed_book(question=question).answer).strip()
        emit("answer", answer=answer, strict=False, closed_book=True)
        return CRAGResult(question=question, answer=answer, action=None, trace=trace, retrieval_skipped=True,
                          mode=mode, outcome=Outcome(Ending.CLOSED_BOOK, "decide-retrieval: no retrieval needed"))

    def needs_retrieval(self, question: str, trace: Trace) -> bool:
        """False only when the decider's output parses as "no retrieval needed"."""
        with step(trace, "decide-retrieval"):
            try:
                needed = self.decider(question=question, config=CRITIQUE_CONFIG).needs_retrieval
            except Exception as exc:  # adapter parse failures surface as several exception types
                needed = True
                trace.note(f"decide-retrieval: unparseable output ({type(exc).__name__}); retrieving")
            emit("decide-retrieval", needs_retrieval=needed)
        if needed is False:
            trace.note("decide-retrieval: no retrieval needed; answering closed-book")
            return False
        return True
