"""Training data and calibration of the judges: labels, perturbations, thresholds (no embedder)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from optimize.training.pairs import chunk_key, names_subject, popqa_support_pairs, states_answer
from program.stages.decision import evaluator_action
from program.adaptation.calibrate import calibrate_actions, f1, popqa_expected
from program.judgments.support import fit_thresholds, fit_thresholds_sets
from program.adaptation.pairs import perturb


def test_states_answer_needs_whole_words():
    assert states_answer("He was a Honduran journalist.", ["journalist", "journo"])
    assert not states_answer("He was a photojournalist.", ["journalist"])


def test_names_subject_needs_the_last_name():
    assert names_subject("Espinal was born in Yoro.", "Herlyn Espinal")
    assert not names_subject("Herlyn was born in Yoro.", "Herlyn Espinal")


def test_chunk_key_matches_the_labels_spelling():
    assert chunk_key("decline-codes.md#2") == "decline-codes#2"
    assert chunk_key("kb/fees.md#0") == "fees#0"


def test_perturbations_change_a_name_a_number_and_the_negation():
    sentence = "Olaf Holtedahl was a Norwegian geologist born in 1885 in Kristiania."
    variants = dict((kind, claim) for claim, kind in perturb(sentence, ["Bergen"], random.Random(0)))
    assert set(variants) == {"name", "number", "negation"}
    assert "Bergen" in variants["name"] and "1885" not in variants["number"]
    assert variants["negation"].startswith("Olaf Holtedahl was not a Norwegian")


def test_popqa_expected_labels_and_the_lower_bound():
    groups = ["q1"] * 4 + ["q2"] * 3
    labels = [0, 1, 0, 1, 0, 0, 0]  # q1's 4th passage is relevant but not in the top 3
    scores = [0.1, 0.9, 0.2, 0.8, 0.3, 0.2, 0.1]
    best, expected, lower = popqa_expected(groups, labels, scores)
    assert best == {"q1": 0.9, "q2": 0.3}
    assert expected == {"q1": "correct", "q2": "incorrect"}
    assert lower == 0.8  # every relevant passage (0.9, 0.8) scores at least 0.8


def test_calibrate_actions_finds_the_separating_thresholds():
    best = {"a": 0.9, "b": 0.95, "c": 0.5, "d": 0.45, "e": 0.1, "f": 0.02}
    expected = {"a": "correct", "b": "correct", "c": "ambiguous", "d": "ambiguous", "e": "incorrect", "f": "incorrect"}
    t = calibrate_actions(best, expected)
    assert t["train_action_accuracy"] == 1.0
    assert all(evaluator_action(best[q], t["lower"], t["upper"]) == a for q, a in expected.items())


def test_calibrate_support_three_verdicts():
    targets = [1.0, 1.0, 0.5, 0.5, 0.0, 0.0]
    scores = np.array([0.9, 0.8, 0.5, 0.45, 0.1, 0.2])
    fitted, acc = fit_thresholds(targets, scores)
    assert acc == 1.0 and 0.2 < fitted.partially <= 0.45 and 0.5 < fitted.fully <= 0.8
    assert [fitted.verdict(s) for s in scores] == ["fully", "fully", "partially", "partially", "no", "no"]


def test_f1_of_kept_strips():
    assert f1([1, 1, 0, 0], [1, 0, 1, 0]) == 0.5
    assert f1([0, 0], [0, 0]) == 1.0


@pytest.mark.parametrize("best,action", [(0.7, "correct"), (0.3, "ambiguous"), (0.05, "incorrect")])
def test_evaluator_action(best, action):
    assert evaluator_action(best, 0.1, 0.6) == action


class _BatchKB:
    """The same passages for every question, through ``search_batch`` as the judges' data reads it."""

    def __init__(self, texts):
        from program.types import Passage

        self.passages = [Passage(id=f"doc{i}#0", text=t, score=0.5) for i, t in enumerate(texts)]

    def search_batch(self, queries, k):
        return [self.passages[:k] for _ in queries]


def test_popqa_claims_are_the_answer_the_strips_state_and_a_wrong_one():
    from tests.test_judges import WordEmbedder

    kb = _BatchKB(["Czimra Gyula (Budapest, 1901 - Budapest, 1966) was a Hungarian footballer. "
                   "He played as a midfielder for Ferencvaros. Czimra won two league titles."])
    questions = [{"id": "popqa-1", "question": "In what city was Gyula Czimra born?", "relation": "place of birth",
                  "subject": "Gyula Czimra", "possible_answers": ["Budapest"]},
                 {"id": "popqa-2", "question": "In what city was Anna Berg born?", "relation": "place of birth",
                  "subject": "Anna Berg", "possible_answers": ["Oslo"]}]
    pairs = popqa_support_pairs(questions, kb, WordEmbedder())
    # only the first question's subject has an answering strip; its claims: the gold answer
    # (supported), another question's answer (Oslo), the gold answer against strips without it
    assert pairs.groups == ["popqa-1"] * 3
    assert pairs.labels == [1, 0, 0]
    from program.adaptation.pairs import support_pair_features  # noqa: F401 - rows are its features
    from program.judgments.support import SUPPORT_NAMES

    lexical = [row[SUPPORT_NAMES.index("lexical_verdict")] for row in pairs.dense]
    assert lexical[1] == 0.0  # "was born in Oslo." names a city the evidence does not


def test_support_thresholds_weigh_the_popqa_claims_too():
    targets, scores = [1.0, 0.5, 0.0], np.array([0.9, 0.5, 0.1])
    # PopQA claims: supported ones score .3-.4, wrong ones .2: "partially" must sit at or below .3
    fitted, mean = fit_thresholds_sets(targets, scores, [1, 1, 0, 0], [0.3, 0.4, 0.2, 0.2])
    assert mean == 1.0 and 0.2 < fitted.partially <= 0.3 and 0.5 < fitted.fully <= 0.9
