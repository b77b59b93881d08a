"""The retrieval evaluator: grade each retrieved passage, then choose an action (CRAG §4.2–4.3).

CRAG's evaluator scores every (question, document) pair; the scores set a confidence and,
by an upper and a lower threshold, one of three actions:

    CORRECT    at least one passage scores >= upper
    INCORRECT  every passage scores < lower
    AMBIGUOUS  otherwise

The scorer is the judgment's contract, a score in [0, 1] per passage, and behind it stands
what the compile measured best (``program.judges``): the trained passage judge (no LM call),
the DSPy Signature ``GradeRetrieval`` (three yes/no judgments turned into a score by
``score_grade``, at temperature 0), or a cascade (the LM only where the trained score falls
inside its uncertainty band). The thresholds are calibrated by ``python -m optimize.compile``.
"""

from __future__ import annotations

import dspy

from program.judgments.features import STALE_CUES
from program.judgments import PASSAGE
from program.judges.store import who_judges
from program.lm.configure import CRITIQUE_CONFIG, supports_logprobs
from program.lm.token_scores import field_probability
from program.stages.events import emit
from program.types import ChunkGrade, Passage
from signatures import GradeRetrieval

UNGRADED = -1.0  # the score of a passage lazy evaluation did not grade

def reason_for(score: float, lower: float, upper: float, stale: bool = False) -> str:
    """The reason a trained score stands for: ``relevant`` (>= upper), ``partial`` (>= lower)
    or ``irrelevant``; ``stale`` when the passage says it is outdated and is not relevant."""
    if score >= upper:
        return "relevant"
    if stale:
        return "stale"
    return "partial" if score >= lower else "irrelevant"


def similarity_grade(passage: Passage, lower: float, upper: float) -> ChunkGrade:
    """A passage's grade from its retrieval similarity alone (cosine clipped to [0, 1]), for a
    program with no trained judge that must not spend an LM call per passage."""
    score = round(min(1.0, max(0.0, passage.score)), 4)
    return ChunkGrade(passage.id, score, reason_for(score, lower, upper), f"retrieval similarity {score:.3f}")


LOGPROBS_CONFIG = {**CRITIQUE_CONFIG, "logprobs": True, "top_logprobs": 5}


def score_grade(same_entity: bool | float, answers_question: bool | float,
                outdated: bool | float = False) -> tuple[float, str]:
    """Turn GradeRetrieval's three judgments into a relevance score in [0, 1] and a reason.

    Each judgment is a boolean, or the LM's probability of True (``grade_probabilities``):
    the score is then ``0.6 * p(answers) + 0.4 * p(same entity)``, capped at 0.3 when
    ``p(outdated) >= 0.5``; the reason is ``relevant`` from 0.8, ``irrelevant`` under 0.2.

    ============================  =====  ==========
    judgments                     score  reason
    ============================  =====  ==========
    right entity, states answer   1.0    relevant
    states an answer, namesake?   0.6    partial
    right entity, no answer       0.4    partial
    neither                       0.0    irrelevant
    outdated (and not neither)    <=0.3  stale
    ============================  =====  ==========

    Asking a small model for booleans, not a number, is what makes its grades usable: asked
    for a category or a score, the 1.5B model answered "irrelevant" to nearly everything.
    """
    score = round(0.6 * _truth(answers_question) + 0.4 * _truth(same_entity), 4)
    if score < 0.2:
        return score, "irrelevant"
    if _truth(outdated) >= 0.5:
        return min(score, 0.3), "stale"
    return score, "relevant" if score >= 0.8 else "partial"


def _truth(value) -> float:
    """A judgment as a number: a probability stays, anything else is read as a boolean."""
    return float(value) if isinstance(value, (int, float)) else float(bool(value))


def grade_probabilities(pred) -> tuple[bool | float, bool | float, bool | float]:
    """``(same_entity, answers_question, outdated)`` of a GradeRetrieval prediction: each the
    LM's probability of True when the prediction carries token log probabilities
    (``program.lm.token_scores``), else the parsed boolean."""
    logprobs = pred.get("logprobs") if hasattr(pred, "get") else None
    values = []
    for name in ("same_entity", "answers_question", "outdated"):
        p = field_probability(logprobs, name) if logprobs else None
        values.append(bool(getattr(pred, name)) if p is None else round(p, 4))
    return tuple(values)


class RetrievalEvaluator(dspy.Module):
    """Grade retrieved passages, best-retrieved first: trained judge, LM, or a cascade of both.

    Args:
        max_chars: passages are cut to this many characters before LM grading (about 170
            tokens; the local model reads about 30 prompt tokens a second).
        judges: a ``program.judges.JudgeSet``, or None to grade with ``GradeRetrieval`` only.
            With judges, every passage gets its trained score (no LM call); the LM grades only
            the passages the passage judge's ``JudgeChoice`` hands it (``lm``: all; ``cascade``:
            scores inside the band), and its score then stands.

        probabilities: score the LM's grade from its token probabilities (``grade_probabilities``)
            when the configured LM gives them (``program.lm.configure.supports_logprobs``), for thresholds
            calibrated on such scores (``optimize.lm_thresholds``); set by ``load_compiled``.

    ``forward(question, passages, stop_at=None, lower=0.2, upper=0.6)``: ``lower`` and ``upper``
    name the trained scores' reasons (``reason_for``); trained scores cost no call, so every
    passage gets one and ``stop_at`` applies to LM grading only.

    ``ask_lm=False`` never calls the LM: the trained score stands wherever there is a trained
    passage judge (even where the compile chose the LM for this knowledge base), and with none the
    passage's retrieval similarity is its score (``similarity_grade``).

    ``forward(question, passages, stop_at=None)``: with ``stop_at`` (the upper threshold), grading
    stops at the first passage scoring at least ``stop_at``: the action is then CORRECT whatever
    the others score (CRAG §4.3 needs only one passage above the upper threshold), so their calls
    are saved. Those passages get ``UNGRADED`` grades (score -1.0, reason "ungraded") and still go
    to refinement, whose strip filter judges them.

    A call whose output cannot be parsed grades that passage ``irrelevant`` with score 0
    and says so in the grade's explanation; it never raises for bad LM output.

    Example:
        >>> grades = RetrievalEvaluator()(question="Who wrote Dune?", passages=passages)
    """

    def __init__(self, max_chars: int = 700, judges=None, probabilities: bool = False):
        super().__init__()
        self.grade = dspy.Predict(GradeRetrieval)
        self.max_chars = max_chars
        self.judges = judges
        self.probabilities = probabilities

    def forward(self, question: str, passages: list[Passage], stop_at: float | None = None,
                lower: float = 0.2, upper: float = 0.6, ask_lm: bool = True,
                stage: str = "initial") -> list[ChunkGrade]:
        """The passages' grades, one each, in order; ``stage`` (``initial`` | ``corrected``) names
        the retrieval in the ``retrieved`` and ``graded`` events."""
        emit("retrieved", stage=stage, passages=passages)
        grades = self._grades(question, passages, stop_at, lower, upper, ask_lm)
        emit("graded", stage=stage, grades=grades, lower=lower, upper=upper)
        return grades

    def _grades(self, question: str, passages: list[Passage], stop_at: float | None, lower: float, upper: float,
                ask_lm: bool) -> list[ChunkGrade]:
        trained = self.judges is not None and self.judges.has(PASSAGE)
        if who_judges(self.judges, PASSAGE).trained or (trained and not ask_lm):
            return self._judge(question, passages, upper, lower, ask_lm)
        if not ask_lm:
            return [similarity_grade(p, lower, upper) for p in passages]
        grades: list[ChunkGrade] = []
        decided = False  # a graded passage reached stop_at: every later one stays ungraded
        for passage in passages:
            if decided:
                grades.append(ChunkGrade(passage.id, UNGRADED, "ungraded",
                                         f"not graded: a passage above {stop_at} already decided CORRECT"))
            else:
                grades.append(self._grade_one(question, passage))
                decided = stop_at is not None and grades[-1].score >= stop_at
        return grades

    def _judge(self, question: str, passages: list[Passage], upper: float, lower: float,
               ask_lm: bool = True) -> list[ChunkGrade]:
        choice = who_judges(self.judges, PASSAGE)
        grades = []
        for passage, score in zip(passages, self.judges.score(PASSAGE, question=question, passages=passages)):
            if ask_lm and choice.asks_lm(score):
                grade = self._grade_one(question, passage)
                grade.explanation = f"trained {score:.3f} inside the band {choice.band}: LM grade; " + grade.explanation
                grades.append(grade)
                continue
            stale = any(cue in passage.text.lower() for cue in STALE_CUES)
            reason = reason_for(score, lower, upper, stale)
            grades.append(ChunkGrade(passage.id, round(score, 4), reason, f"trained judge {score:.3f}"))
        return grades

    def _grade_one(self, question: str, passage: Passage) -> ChunkGrade:
        # a provider that gives no log probabilities may refuse the option: ask for them only where they come
        probabilities = self.probabilities and supports_logprobs()
        try:
            config = LOGPROBS_CONFIG if probabilities else CRITIQUE_CONFIG
            out = self.grade(question=question, passage=passage.text[: self.max_chars], config=config)
        except Exception as exc:  # adapter parse failures surface as several exception types
            return ChunkGrade(passage.id, 0.0, "irrelevant", f"unparseable grader output: {type(exc).__name__}")
        judged = grade_probabilities(out) if probabilities else (out.same_entity, out.answers_question, out.outdated)
        score, reason = score_grade(*judged)
        if probabilities:
            return ChunkGrade(passage.id, score, reason,
                              "LM p(same entity)={}, p(answers)={}, p(outdated)={}".format(*judged))
        return ChunkGrade(passage.id, score, reason)
