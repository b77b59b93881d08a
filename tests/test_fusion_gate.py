"""The per-question fusion analysis (``experiments.fusion_gate``): its oracle and its gate."""

from __future__ import annotations

import pytest

from experiments import fusion_gate as fg


def row(dense, lexical, relevant, split="train", domain="kubernetes", category="vocabulary-mismatch"):
    return {"rankings": {"dense": dense, "lexical": lexical}, "relevant": set(relevant), "split": split,
            "domain": domain, "category": category}


DENSE = ["a", "b", "c", "d", "e", "f"]
NOISE = ["u", "v", "w", "x", "y", "z"]


def test_the_gate_drops_a_lexical_ranking_that_shares_nothing_with_the_dense_one():
    r = row(DENSE, NOISE, {"e"})
    # k=10, lexical .75: the noise's first three outrank dense's fifth, so hybrid loses "e"
    assert "e" not in fg.hybrid(r, 0.75)[:5]
    assert fg.gated(r, n=5, share=0.2, low=0.0)[:5] == DENSE[:5]
    assert fg.recall5(fg.oracle(r), r["relevant"]) == 1.0


def test_the_gate_keeps_the_lexical_weight_when_the_two_agree():
    r = row(DENSE, ["z", "c", "a", "y", "x"], {"z"})
    assert fg.gated(r, n=5, share=0.2, low=0.0) == fg.hybrid(r, 0.75)
    assert "z" in fg.gated(r, n=5, share=0.2, low=0.0)[:5]


def test_the_oracle_is_never_below_dense_or_hybrid():
    rows = [row(DENSE, NOISE, {"e"}), row(DENSE, ["z", "y"], {"z"}), row(DENSE, DENSE, {"f"})]
    for r in rows:
        best = fg.recall5(fg.oracle(r), r["relevant"])
        assert best == max(fg.recall5(DENSE, r["relevant"]), fg.recall5(fg.hybrid(r, 0.75), r["relevant"]))
    assert [fg.recall5(fg.oracle(r), r["relevant"]) for r in rows] == [1.0, 1.0, 0.0]


def test_the_gate_is_chosen_on_train_and_dev_rows_only():
    with pytest.raises(ValueError, match="test rows"):
        fg.choose_gate([row(DENSE, NOISE, {"e"}, split="test")])
    gate, score = fg.choose_gate([row(DENSE, NOISE, {"e"})])
    assert score == 1.0 and gate["low"] == 0.0
