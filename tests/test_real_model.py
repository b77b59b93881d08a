"""The real embedded 0.5B model answers two PopQA questions end to end (slow: about two minutes)."""

from __future__ import annotations

import dspy
import pytest

from eval_sets.popqa import load_questions
from program.app import resources
from program.lm.configure import build_lm
from program.stages.crag import CRAG
from program.types import Action, CRAGResult

pytestmark = pytest.mark.real_model


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
        # lazy evaluation: graded passages score in [0, 1]; once one passes the upper threshold the rest are ungraded
        assert len(result.grades) == 3
        graded = [g for g in result.grades if g.reason != "ungraded"]
        assert graded and all(0.0 <= g.score <= 1.0 for g in graded)
        assert all(g.score == -1.0 for g in result.grades if g.reason == "ungraded")
        if len(graded) < 3:  # grading stopped at the first passage above the upper threshold
            assert graded[-1].score >= crag.upper and result.grades[len(graded)].reason == "ungraded"
        # the real model was called and its usage was counted
        assert result.trace.lm_calls >= 3 and result.trace.prompt_tokens > 100
        # the question's own knowledge-base document is retrieved
        assert [s.step for s in result.trace.steps][:2] == ["retrieve", "evaluate"]
        if not result.fallback:
            assert result.claims and all(c.support in ("fully", "partially", "no") for c in result.claims)


def test_real_model_with_the_compiled_judges(program):
    """The committed compile (prompts, trained judges, PopQA thresholds) on the real 0.5B model."""
    from program.app.compiled import load_compiled

    crag, lm = program
    compiled = load_compiled(knowledge_base=crag.knowledge_base, web="snapshot", embedder=crag.refiner.embedder)
    assert (compiled.lower, compiled.upper) == (0.05, 0.55)  # calibrated on PopQA train for this knowledge base
    question = next(q for q in load_questions(split=None) if q["id"] == "popqa-0001")
    with dspy.context(lm=lm):
        result = compiled(question=question["question"])
    assert len(result.grades) == 3 and all(0.0 <= g.score <= 1.0 for g in result.grades)
    # the trained judges score every passage and strip; the LM grades only inside the cascade's band
    assert all(g.explanation.startswith(("trained judge", "trained ")) for g in result.grades)
    assert all(0.0 <= s.relevance <= 1.0 for s in result.strips)
    assert 1 <= result.trace.lm_calls <= 6 and "usefulness" in [s.step for s in result.trace.steps]


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
