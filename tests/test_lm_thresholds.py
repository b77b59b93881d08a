"""The evaluator's thresholds on the LM's token-probability scores (optimize.lm_thresholds)."""

from __future__ import annotations

import dspy
import pytest

from optimize.lm_thresholds import calibrate_lm_thresholds, query_scores
from program.types import Passage
from signatures import GradeRetrieval
from tests.fake_lm import FakeLM, P


class TopicKnowledgeBase:
    """One passage per query: the passage named after the query's first word."""

    def search(self, query: str, k: int = 3) -> list[Passage]:
        topic = query.split()[0].lower()
        return [Passage(f"{topic}.md#1", f"{topic} page")]


# the model's probability that the page answers, by topic: refunds and payouts are covered,
# bitcoin and shopify are not, but the model is never quite sure
P_ANSWERS = {"refunds": 0.8, "payouts": 0.7, "bitcoin": 0.45, "shopify": 0.6, "fees": 0.75, "paypal": 0.5}


def rule(inputs):
    p = P_ANSWERS[inputs["passage"].split()[0]]
    return {"same_entity": P(p), "answers_question": P(p), "outdated": P(0.05)}


def queries(*pairs):
    return [{"id": f"q{i}", "question": f"{topic} question?", "expected_action": action}
            for i, (topic, action) in enumerate(pairs)]


def test_query_scores_are_the_best_passage_score_from_token_probabilities():
    with dspy.context(lm=FakeLM({GradeRetrieval: rule})):
        scores = query_scores(dspy.Predict(GradeRetrieval), queries(("refunds", "correct"), ("bitcoin", "incorrect")),
                              TopicKnowledgeBase(), log=lambda *_: None)
    # 0.6 p(answers) + 0.4 p(same entity), both the probability the fake model gave True
    assert {q: s["probabilities"] for q, s in scores.items()} == {"q0": pytest.approx(0.8), "q1": pytest.approx(0.45)}
    assert {q: s["words"] for q, s in scores.items()} == {"q0": 1.0, "q1": 0.0}  # "True" / "False" sampled


def test_thresholds_are_chosen_on_train_and_reported_on_dev():
    train = queries(("refunds", "correct"), ("payouts", "correct"), ("bitcoin", "incorrect"), ("shopify", "incorrect"))
    dev = queries(("fees", "correct"), ("paypal", "incorrect"))
    dev = [{**q, "id": "d" + q["id"]} for q in dev]
    with dspy.context(lm=FakeLM({GradeRetrieval: rule})):
        t = calibrate_lm_thresholds(dspy.Predict(GradeRetrieval), TopicKnowledgeBase(), train, dev, log=lambda *_: None)
    # every sampled word of the booleans says True for shopify (0.6) as for payouts (0.7);
    # the probabilities separate them: 0.65 <= upper <= 0.7, and lower above shopify's 0.6
    assert 0.6 < t["lower"] <= t["upper"] <= 0.7 and t["train_action_accuracy"] == 1.0
    assert (t["dev_action_accuracy"], t["dev_questions"]) == (1.0, 2)
    assert t["dev_confusion"] == {"correct": {"correct": 1}, "incorrect": {"incorrect": 1}}
    assert t["score"] == "token probabilities" and t["dev_auc"] == 1.0
    # the sampled words call shopify's page as relevant as refunds' (train: 3 of 4), and on dev
    # paypal's (0.5, written "True") as fees': 1 of 2
    assert t["words"]["train_action_accuracy"] == 0.75 and t["words"]["dev_action_accuracy_fixed_bands"] == 0.5


def test_the_compile_calibrates_only_where_the_lm_grades_and_gives_probabilities(monkeypatch):
    from optimize import compile as compile_module
    from program.judges import JudgeChoice, JudgeSet
    from program.judges.store import corpus_key

    class KB:
        manifest = {"files": {"faq.md": "ab"}}

    judges = JudgeSet({}, choices_by_corpus={corpus_key(KB()): {"passage": JudgeChoice("lm")}})
    calls = []
    monkeypatch.setattr(compile_module, "help_centre_thresholds", lambda grader, kb: calls.append(kb) or {"k": {}})
    local, served_elsewhere = FakeLM({}), dspy.LM("anthropic/claude")
    saved = {"lm_thresholds_by_corpus": {"k": {"lower": 0.5, "upper": 0.6}}}
    # prompts other than the grader recompiled: the saved calibration stands, no LM call
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, saved, ["rewrite"]) == saved[
        "lm_thresholds_by_corpus"] and calls == []
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), served_elsewhere, None, ["grading"]) == {}
    judges.choices_by_corpus[corpus_key(KB())]["passage"] = JudgeChoice("trained")
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, None, ["grading"]) == {} and calls == []
    judges.choices_by_corpus[corpus_key(KB())]["passage"] = JudgeChoice("lm")
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, saved, ["judges"]) == {"k": {}}
    # the default compile does not calibrate, and drops the saved calibration of a recompiled grader
    calls.clear()
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, saved, ["grading"],
                                                    calibrate=False) == {}
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, None, list(compile_module.KINDS),
                                                    calibrate=False) == {} and calls == []
    assert compile_module.help_centre_lm_thresholds(judges, None, KB(), local, saved, ["rewrite"],
                                                    calibrate=False) == saved[
        "lm_thresholds_by_corpus"]
