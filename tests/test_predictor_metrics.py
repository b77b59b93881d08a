"""The per-predictor metrics that compilation optimises and reports."""

from __future__ import annotations

import dspy
import pytest

from optimize import predictor_metrics as pm
from program.types import Passage


def strips_example(texts, relevant):
    return dspy.Example(question="q", strips=[f"[{i}] {t}" for i, t in enumerate(texts, 1)], texts=texts,
                        relevant=relevant).with_inputs("question", "strips")


def test_strip_f1_counts_kept_against_relevant_over_every_strip():
    texts = ["Jane Roe founded it.", "It is in Ohio.", "Built in 1999.", "The sky is blue."]
    example = strips_example(texts, relevant=[1, 3])
    pred = dspy.Prediction(answer_spans=["[1] Jane Roe", "[2] Ohio"])  # tp, fp; strip 3 missed, strip 4 rightly left
    assert pm.strip_f1([(example, pred, 0.5)]) == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert pm.strip_accuracy(example, pred) == 0.5
    figures = pm.dev_figures("strips", [(example, pred, 0.5)])
    assert figures["primary"] == 0.5 and figures["accuracy"] == 0.5


def test_strip_accuracy_credits_a_misnumbered_copy_and_ignores_garbage():
    example = strips_example(["Jane Roe founded it.", "It is in Ohio."], relevant=[1])
    assert pm.strip_accuracy(example, dspy.Prediction(answer_spans=["[2] Jane Roe"])) == 1.0
    assert pm.strip_accuracy(example, dspy.Prediction(answer_spans="not a list")) == 0.5


def test_bare_strip_numbers_keep_their_strips_as_loose_copies():
    # the failing output of the 1.5B model during compile: [1, 3] instead of "[1] words"
    from program.refine import score_spans

    assert score_spans([1, 3, 9], ["a b", "c d", "e f"]) == [0.5, 0.0, 0.5]
    example = strips_example(["Jane Roe founded it.", "It is in Ohio.", "Built in 1999."], relevant=[1, 3])
    assert pm.strip_accuracy(example, dspy.Prediction(answer_spans=[1, 3])) == 1.0


class OneDocKB:
    def search(self, query, k=3):
        doc = "decline-codes.md" if "decline" in query else "fees.md"
        return [Passage(id=f"{doc}#0", text="...")]


def test_rewrite_metric_is_half_terms_half_retrieval():
    example = dspy.Example(question="my card payment failed", expert_terms=["decline code", "do_not_honor"],
                           relevant_doc_ids=["decline-codes"]).with_inputs("question")
    metric = pm.rewrite_metric_for(OneDocKB())
    assert metric(example, dspy.Prediction(query="decline code meaning")) == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert metric(example, dspy.Prediction(query="payment failed")) == 0.0
    assert pm.doc_of("kb/decline-codes.md#3") == "decline-codes"


def test_answer_metric_rewards_grounded_correct_answers():
    example = dspy.Example(question="Who founded Acme?", context=["[1] Acme was founded by Jane Roe in 1999."],
                           gold_answers=["Jane Roe"]).with_inputs("question", "context")
    grounded = dspy.Prediction(answer="Acme was founded by Jane Roe [1].")
    padded = dspy.Prediction(answer="Jane Roe, a famous Martian astronaut and painter, founded it.")
    assert pm.answer_and_grounding_metric(example, grounded) == 1.0
    assert pm.answer_and_grounding_metric(example, padded) == 0.5
    assert pm.answer_and_grounding_metric(example, dspy.Prediction(answer="Elon Musk")) == 0.0


@pytest.mark.parametrize(
    "output, scores",
    [
        ("[1] Jane Roe\n[3] 1999", [1.0, 0.0, 1.0]),            # one line per answering strip
        ('["[2] Ohio"]', [0.0, 1.0, 0.0]),                       # a JSON list
        ("[1, 3]", [0.5, 0.0, 0.5]),                             # bare numbers: named, not copied
        ("1999", [0.0, 0.0, 1.0]),                               # no number: the strip holding it
        ("[2] Jane Roe", [1.0, 0.0, 0.0]),                       # misnumbered copy
        ("NONE", [0.0, 0.0, 0.0]),
        ("I found nothing", [0.0, 0.0, 0.0]),
    ],
)
def test_score_spans_reads_every_output_shape(output, scores):
    from program.refine import score_spans

    assert score_spans(output, ["Jane Roe founded it.", "It is in Ohio.", "Built in 1999."]) == scores
