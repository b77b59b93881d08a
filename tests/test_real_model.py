"""The real embedded 0.5B model answers two PopQA questions end to end (slow: about two minutes)."""

from __future__ import annotations

import dspy
import pytest

from eval_sets.popqa import load_questions
from program.app import resources
from program.lm.configure import build_lm
from program.stages.crag import CRAG
from program.types import Action, CRAGResult

pytestmark = [pytest.mark.real_model, pytest.mark.slow]


@pytest.fixture(scope="module")
def program():
    lm = build_lm("embedded-0.5b")
    lm.cache = False  # a cached answer would report no tokens: this test is about the real model
    kb = resources.knowledge_base()
    with dspy.context(lm=lm):
        yield CRAG(kb, web=resources.web_backend("snapshot"), embedder=resources.embedder()), lm


def test_real_model_answers_popqa_questions(program):
    crag, lm = program
    questions = [q for q in load_questions(split=None) if q["id"] in ("popqa-0001", "popqa-0002")]
    assert len(questions) == 2
    with dspy.context(lm=lm):
        results = [crag(question=q["question"]) for q in questions]
    for q, result in zip(questions, results):
        assert isinstance(result, CRAGResult) and result.answer
        assert result.action in (Action.CORRECT, Action.AMBIGUOUS, Action.INCORRECT)
        # no trained judge and no LM grade: every passage scores its retrieval similarity, in [0, 1]
        assert len(result.grades) == 3
        assert all(0.0 <= g.score <= 1.0 and g.explanation.startswith("retrieval similarity") for g in result.grades)
        # the real model wrote the draft in one call (its usage counted), then the action was decided on it
        steps = [s.step for s in result.trace.steps]
        assert steps[:4] == ["retrieve", "evaluate", "draft", "decide"]
        assert result.trace.steps[2].lm_calls >= 1 and result.trace.steps[1].lm_calls == 0  # 2: DSPy's JSON fallback
        assert result.trace.lm_calls >= 1 and result.trace.prompt_tokens > 100
        assert result.draft and set(result.draft_checks) >= {"support", "premise", "token_probability", "abstained"}
        assert 0.0 <= result.confidence <= 1.0
        if not result.fallback:
            assert result.claims and all(c.support in ("fully", "partially", "no") for c in result.claims)


def test_real_model_with_the_compiled_judges(program):
    """The committed compile (prompts, trained judges, PopQA thresholds) on the real 0.5B model."""
    from program.app.configuration import load_compiled

    crag, lm = program
    compiled = load_compiled(knowledge_base=crag.knowledge_base, web="snapshot", embedder=crag.refiner.embedder)
    # calibrated on PopQA train for this knowledge base
    assert (compiled.settings.lower, compiled.settings.upper) == (0.05, 0.55)
    question = next(q for q in load_questions(split=None) if q["id"] == "popqa-0001")
    with dspy.context(lm=lm):
        result = compiled(question=question["question"])
    assert len(result.grades) == 3 and all(0.0 <= g.score <= 1.0 for g in result.grades)
    # the trained judge scores every passage; the route never asks the LM, not even inside the cascade's band
    assert all(g.explanation.startswith("trained judge") for g in result.grades)
    assert result.trace.steps[1].step == "evaluate" and result.trace.steps[1].lm_calls == 0
    # PopQA's passages are refined (compiled/refinement.json): every strip read carries its trained score
    assert compiled.settings.refine_passages
    assert result.strips and all(0.0 <= s.relevance <= 1.0 for s in result.strips)
    steps = [s.step for s in result.trace.steps]
    # a kept strip is drafted from; none kept goes straight to the decision and the correction
    assert result.trace.lm_calls >= 1 and steps[2:5] in (["refine", "draft", "decide"], ["refine", "decide", "rewrite"])
    # an answer that was not declined went through the claim check and IsUse (trained judges)
    assert ("usefulness" in steps) is (not result.outcome.declined)


def test_real_model_grades_with_token_probabilities(program):
    """llama.cpp's log probabilities reach the evaluator: the grade is a score between the
    words' bands, and the explanation names each probability."""
    from program.stages.evaluator import RetrievalEvaluator
    from program.types import Passage

    _, lm = program
    passage = Passage("doc#1", "Paris is the capital and largest city of France.")
    with dspy.context(lm=lm):
        (grade,) = RetrievalEvaluator(probabilities=True)(question="What is the capital of France?", passages=[passage])
    assert grade.explanation.startswith("LM p(same entity)=")
    p = [float(x.split("=")[1]) for x in grade.explanation.removeprefix("LM ").split(", ")]
    assert len(p) == 3 and all(0.0 <= v <= 1.0 for v in p)
    assert 0.0 < p[1] < 1.0  # a probability, not a sampled word read as 0 or 1
    assert grade.score == round(0.6 * p[1] + 0.4 * p[0], 4) or grade.reason == "stale"
