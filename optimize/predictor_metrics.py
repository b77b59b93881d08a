"""One metric per compiled predictor, each ``metric(example, prediction, trace=None) -> float`` in [0, 1].

DSPy optimizers call these with a labeled ``dspy.Example`` and the predictor's output.
"""

from __future__ import annotations

from program.evaluator import score_grade
from program.refine import score_span
from program.selfcheck import is_abstention, judge_support


def grade_band(score: float, upper: float = 0.6, lower: float = 0.2) -> str:
    """The action a single passage's score implies: correct, ambiguous or incorrect (CRAG §4.3)."""
    return "correct" if score >= upper else "incorrect" if score < lower else "ambiguous"


def grading_metric(example, pred, trace=None) -> float:
    """Action-band accuracy of GradeRetrieval (half credit for the right band with the wrong category)."""
    score, reason = score_grade(pred.same_entity, pred.answers_question, pred.outdated)
    if grade_band(score) != grade_band(float(example.relevance)):
        return 0.0
    return 1.0 if reason == example.reason else 0.5


def strip_accuracy(example, pred, trace=None) -> float:
    """1.0 when the strip is kept (``score_span`` >= 0.5) exactly when it is labeled relevant."""
    kept = score_span(str(pred.answer_span), example.strip) >= 0.5
    return float(kept == bool(example.relevant))


def rewrite_recall(example, pred, trace=None) -> float:
    """Share of the labeled expert terms that appear in the rewritten query (case-insensitive)."""
    terms = [t.lower() for t in example.expert_terms]
    query = str(pred.query).lower()
    return sum(t in query for t in terms) / len(terms) if terms else 1.0


def support_accuracy(example, pred, trace=None) -> float:
    """1.0 when the verdict from the model's quote (``judge_support``) equals the label."""
    return float(judge_support(example.claim, str(pred.quote), example.evidence) == example.support)


def answer_metric(example, pred, trace=None) -> float:
    """Answer correctness: a gold string in the answer; for unanswerable items, an abstention."""
    answer = str(pred.answer)
    golds = [g.lower() for g in example.gold_answers]
    if any("don't know" in g for g in golds):
        return float(is_abstention(answer))
    return float(any(g in answer.lower() for g in golds))
