"""Truthfulness, the confidence's AUROC and the risk-coverage table of an evaluation run."""

from __future__ import annotations

import pandas as pd

from optimize.selective import auroc, plot_risk_coverage, risk_coverage, selective_figures, truthfulness


def rows(*items):
    """(correct, abstained, answerable, confidence, candidate_correct) per row."""
    return pd.DataFrame([dict(correct=c, abstained=a, answerable=ans, confidence=conf, candidate_correct=str(cc),
                              mode="crag") for c, a, ans, conf, cc in items])


def test_truthfulness_counts_right_plus_one_dont_know_zero_wrong_minus_one():
    df = rows((True, False, True, 0.9, True),    # right answer: +1
              (False, True, True, 0.1, False),   # "I don't know" to an answerable question: 0
              (False, False, True, 0.6, False),  # wrong: -1
              (True, True, False, 0.2, True),    # declined an unanswerable question: right, +1
              (False, False, False, 0.7, False))  # answered an unanswerable one: wrong, -1
    assert truthfulness(df) == 0.0
    assert truthfulness(df.iloc[:1]) == 100.0 and truthfulness(df.iloc[:0]) is None


def test_auroc_ranks_pairs_and_counts_ties_half():
    assert auroc([0.9, 0.8, 0.1], [True, True, False]) == 1.0
    assert auroc([0.1, 0.9], [True, False]) == 0.0
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    assert auroc([0.3, 0.4], [True, True]) is None


def test_risk_coverage_answers_the_most_confident_share():
    df = rows(*[(i < 7, False, True, 0.9 - i / 10, i < 7) for i in range(10)])
    # the seven most confident are right, the last three wrong
    assert risk_coverage(df) == {"100": 70.0, "90": 77.8, "80": 87.5, "70": 100.0}
    figures = selective_figures(df)
    assert figures["confidence_auroc"] == 1.0 and figures["truthfulness"] == 40.0


def test_the_plot_draws_a_line_per_mode_with_a_confidence(tmp_path):
    df = rows(*[(i < 7, False, True, 0.9 - i / 10, i < 7) for i in range(10)])
    assert plot_risk_coverage(df, tmp_path / "rc.png", "test").stat().st_size > 1000
    assert plot_risk_coverage(df.assign(confidence=float("nan")), tmp_path / "none.png", "test") is None
