"""The follow-up rewrite study (``experiments.standalone_variants``): its variants and its rows."""

from __future__ import annotations

import pytest

from experiments.standalone_variants import main, rewriter, said

ROW = {"history": [{"role": "user", "content": "Which taints does the node controller add?"},
                   {"role": "assistant", "content": "node.kubernetes.io/not-ready, among others."}],
       "followup": "And which one goes on a node it can't reach?"}


def test_what_the_user_wrote_is_the_user_turns_then_the_follow_up():
    assert said(ROW) == "Which taints does the node controller add? And which one goes on a node it can't reach?"


def test_each_variant_rewrites_with_its_own_signature():
    assert list(rewriter("committed").rewrite.signature.output_fields) == ["standalone_question"]
    assert "Keep the user's own words" in rewriter("keep-words").rewrite.signature.instructions
    assert list(rewriter("refers-to").rewrite.signature.output_fields) == ["refers_to", "standalone_question"]
    with pytest.raises(SystemExit, match="unknown variant 'longer'"):
        rewriter("longer")


def test_the_test_rows_are_not_used_to_choose():
    with pytest.raises(SystemExit, match="the test rows are for final figures"):
        main(["--splits", "dev,test"])
