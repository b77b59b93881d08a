"""Thresholds calibrated on out-of-fold scores of training rows (CRAG §4.3-4.4; Self-RAG's IsSup).

The evaluator's ``lower`` / ``upper`` for the best action accuracy (``calibrate_actions``), PopQA's
action labels and its recall-keeping ``lower`` (``popqa_expected``); the figures thresholds are
chosen by (``auc``, ``f1``). Each judgment fits the thresholds it owns in its slice
(``program.judgments.strip``, ``program.judgments.support``). Every search runs over ``GRID``
and never reads the rows a figure is reported on.
"""

from __future__ import annotations

import itertools

import numpy as np

from program.stages.decision import evaluator_action
from program.judgments.base import GRID, f1  # the grid and F1 every judgment's own thresholds are fit by too

__all__ = ["GRID", "auc", "calibrate_actions", "f1", "group_runs", "popqa_expected", "question_best"]


def auc(labels, scores) -> float:
    """ROC AUC of ``scores`` (floats) against ``labels`` (0/1), 4 digits; NaN with one class only."""
    from sklearn.metrics import roc_auc_score  # why: sklearn loads only when a figure is measured

    return round(float(roc_auc_score(labels, scores)), 4) if len(set(labels)) == 2 else float("nan")


def question_best(groups, scores) -> dict:
    best: dict = {}
    for g, s in zip(groups, scores):
        best[g] = max(best.get(g, 0.0), float(s))
    return best


def calibrate_actions(best: dict, expected: dict) -> dict:
    """Grid-search ``(lower, upper)`` for the best action accuracy of ``best`` (question ->
    highest top-3 score) against ``expected`` (question -> correct | ambiguous | incorrect);
    ties go to the narrower band."""

    def accuracy(lower, upper):
        return float(np.mean([evaluator_action(best.get(q, 0.0), lower, upper) == a for q, a in expected.items()]))

    lower, upper = max(((lo, up) for lo, up in itertools.product(GRID, GRID) if lo <= up),
                       key=lambda p: (round(accuracy(*p), 4), -abs(p[1] - p[0])))
    return {"lower": lower, "upper": upper, "train_action_accuracy": round(accuracy(lower, upper), 4),
            "train_questions": len(expected)}


def popqa_expected(groups, labels, scores, recall: float = 0.95) -> tuple[dict, dict, float]:
    """PopQA's action labels from passage labels: ``correct`` when a top-3 passage is
    relevant, else ``incorrect`` (PopQA has no ambiguous label). Also the ``lower`` bound
    that keeps ``recall`` of the relevant passages usable (score >= lower).

    Returns ``(best score per question, expected action per question, lower)``."""
    top3 = [i < 3 for g in group_runs(groups) for i in range(g)]
    best, relevant = {}, {}
    for g, label, score, top in zip(groups, labels, scores, top3):
        if top:
            best[g] = max(best.get(g, 0.0), float(score))
            relevant[g] = relevant.get(g, False) or bool(label)
    positives = sorted(float(s) for s, label in zip(scores, labels) if label)
    lower = max([t for t in GRID if np.mean([p >= t for p in positives]) >= recall] or [GRID[0]])
    return best, {g: "correct" if r else "incorrect" for g, r in relevant.items()}, lower


def group_runs(groups: list[str]) -> list[int]:
    """Lengths of the runs of equal consecutive group ids (one run per question)."""
    return [len(list(g)) for _, g in itertools.groupby(groups)]
