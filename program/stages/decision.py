"""CRAG's action, decided in one place from the passages' scores and the draft's checks (CRAG §4.3).

CRAG's evaluator maps relevance scores to three actions by two thresholds. Here the scores are
one piece of evidence beside the reader's draft, because the reader reads better than the
judges (a judge near AUC .70 that gates alone declines what plain RAG answers):

    CORRECT    the draft holds up: its confidence reaches ``accept`` and its own words stand in
               its passage (it is the answer; no further LM call)
    INCORRECT  nothing holds: the draft abstains, or its own words or the question's premise
               are not in the passages it cites, or no passage reaches ``lower``, or the
               question names what the knowledge base never mentions (``unmentioned``)
    AMBIGUOUS  otherwise: part holds; the correction is added to what holds

After the correction, the answer with the higher confidence is kept, and the program declines
(the honest fallback) when that confidence is below ``accept``: an abstention is earned by a
draft and a correction that both failed their checks, never by one low passage score.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from program.stages.draft import DraftEvidence
from program.types import Action

# Below these the draft's own words or the question's premise are not in its sources.
MIN_SUPPORT = 0.34
MIN_PREMISE = 0.5


@dataclass
class Decision:
    """The action taken on a draft, with its confidence and the reasons the trace shows.

    Attributes:
        action: CORRECT, INCORRECT or AMBIGUOUS.
        confidence: the draft's confidence in [0, 1].
        reasons: short phrases, e.g. ``["confidence 0.81 >= accept 0.50"]``.
    """

    action: Action
    confidence: float
    reasons: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"action={self.action.value} confidence={self.confidence:.2f}: " + "; ".join(self.reasons)


def holds_up(evidence: DraftEvidence, confidence: float, accept: float) -> bool:
    """True when an answer may be given: it does not abstain, its confidence reaches ``accept``,
    at least ``MIN_SUPPORT`` of its own words stand in its passage, and its sources write every
    name the question asks about (``evidence.unmentioned`` is empty)."""
    return (not evidence.abstained and confidence >= accept and evidence.support >= MIN_SUPPORT
            and not evidence.unmentioned)


def evaluator_action(best: float, lower: float, upper: float) -> Action:
    """The action CRAG's retrieval evaluator alone gives a question's best passage score (CRAG
    §4.3): CORRECT at or above ``upper``, INCORRECT below ``lower``, AMBIGUOUS between.

    The route decides from the draft as well (``decide``); this is the one mapping of scores to
    actions besides it, with which the compile calibrates the passage judge's ``lower`` and
    ``upper`` and measures its action accuracy. ``Action`` is a ``str``: it equals ``"correct"``.
    """
    return Action.CORRECT if best >= upper else Action.INCORRECT if best < lower else Action.AMBIGUOUS


def decide(evidence: DraftEvidence, confidence: float, best_score: float, accept: float,
           lower: float) -> Decision:
    """The action for a draft.

    Args:
        evidence: the draft's checks (``program.stages.draft.check_draft``).
        confidence: the draft's confidence in [0, 1] (``ConfidenceModel.score``).
        best_score: the evaluator's best passage score (negative: none graded).
        accept: the operating point: a draft at or above it is the answer.
        lower: the evaluator's lower threshold: no passage at or above it means nothing internal holds.

    Returns:
        A ``Decision``; CORRECT exactly when ``holds_up`` (a confident answer whose words its
        source lacks, a truncated one, or one about a name the documents never write, does not
        hold up).

    Raises:
        ValueError: ``accept`` or ``lower`` outside [0, 1].
    """
    if not (0.0 <= accept <= 1.0 and 0.0 <= lower <= 1.0):
        raise ValueError(f"accept and lower must be in [0, 1], got accept={accept}, lower={lower}")
    if evidence.abstained:
        return Decision(Action.INCORRECT, 0.0, ["the draft says the passages do not answer"])
    if evidence.unmentioned:
        return Decision(Action.INCORRECT, confidence, [unmentioned_reason(evidence.unmentioned)])
    if holds_up(evidence, confidence, accept):
        return Decision(Action.CORRECT, confidence, [f"the draft holds up: confidence {confidence:.2f} >= accept "
                                                     f"{accept:.2f}",
                                                     evidence.summary()])
    failed = [] if confidence < accept else [f"confidence {confidence:.2f} >= accept {accept:.2f}, but"]
    if evidence.support < MIN_SUPPORT:
        failed.append(f"its own words are not in the cited passages (support {evidence.support:.2f})")
    if evidence.premise < MIN_PREMISE:
        failed.append(f"the question's terms are not in the cited passages (premise {evidence.premise:.2f})")
    if 0 <= best_score < lower:
        failed.append(f"no passage reaches lower {lower:.2f} (best {best_score:.2f})")
    if failed:
        if confidence < accept:
            failed.insert(0, f"confidence {confidence:.2f} < accept {accept:.2f}")
        return Decision(Action.INCORRECT, confidence, failed)
    return Decision(Action.AMBIGUOUS, confidence, [f"confidence {confidence:.2f} < accept {accept:.2f}; "
                                                   "the draft's words and premise stand in its passages",
                                                   evidence.summary()])


def unmentioned_reason(names: tuple[str, ...] | list[str]) -> str:
    """The trace's reason for a question about names the sources never write."""
    return "the knowledge base never mentions " + ", ".join(repr(n) for n in names)
