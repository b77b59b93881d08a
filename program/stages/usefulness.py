"""Usefulness of the final answer: Self-RAG's IsUse (Asai et al. 2023, §3.1), as a score in [0, 1].

Self-RAG's critic rates whether the output is a useful response to the question. Here the
contract is the Signature ``JudgeUsefulness``; behind it stands, as for the other judgments,
what the compile chose (``program.judges``): the trained passage judge read on the answer
(its question is the same one: does this text, about this entity, state what was asked?), no
LM call; or the LM, whose yes / no becomes 1.0 / 0.0. Without judges the answer is not judged.
"""

from __future__ import annotations

import dspy

from program.judgments import USEFULNESS
from program.judges.store import who_judges
from program.lm.configure import CRITIQUE_CONFIG
from program.stages.events import emit
from program.stages.selfcheck import strip_citations
from program.types import Passage
from signatures import JudgeUsefulness

NOT_JUDGED = -1.0
LM_THRESHOLD = 0.5  # the LM's "no" (0.0) is below it; its unparsed output (0.5, no verdict) is not


class UsefulnessJudge(dspy.Module):
    """Score whether an answer addresses its question.

    Args:
        judges: a ``program.judges.JudgeSet`` or None. Its ``usefulness`` choice decides: the
            trained passage judge (default) or the LM (``JudgeUsefulness`` at temperature 0).

    ``forward(question, answer) -> float``: a score in [0, 1], or ``NOT_JUDGED`` (-1.0) without
    judges. An LM output that cannot be parsed scores 0.5 (no verdict either way).

    Example:
        >>> UsefulnessJudge(judges)(question="Who wrote Dune?", answer="Frank Herbert wrote Dune [1].")
        0.97
    """

    def __init__(self, judges=None):
        super().__init__()
        self.judge = dspy.Predict(JudgeUsefulness)
        self.judges = judges

    def threshold(self, trained_lower: float) -> float:
        """The score under which an answer gets the stricter retry: ``LM_THRESHOLD`` when the LM
        judges; else ``trained_lower``, the evaluator's lower threshold calibrated on the trained
        passage judge's scores for this knowledge base (the judge that reads the answer).

        The evaluator's own thresholds may be calibrated on the LM's passage probabilities
        (``optimize.lm_thresholds``: .55 on the help centre), which say nothing of the
        LM's yes / no here: read against them, an unparsed verdict (0.5) was retried."""
        if not who_judges(self.judges, USEFULNESS).trained:
            return LM_THRESHOLD
        return trained_lower

    def forward(self, question: str, answer: str) -> float:
        score = self._score(question, answer)
        emit("usefulness", score=score)
        return score

    def _score(self, question: str, answer: str) -> float:
        if self.judges is None:
            return NOT_JUDGED
        text = strip_citations(answer)
        if not who_judges(self.judges, USEFULNESS).trained:
            try:
                return 1.0 if self.judge(question=question, answer=text, config=CRITIQUE_CONFIG).useful else 0.0
            except Exception:  # unparseable: no verdict either way
                return 0.5
        # the answer is embedded like a web page (score 0 makes the judge compute its cosine)
        return round(self.judges.score(USEFULNESS, question=question,
                                       passages=[Passage("answer", text, source="answer")])[0], 4)
