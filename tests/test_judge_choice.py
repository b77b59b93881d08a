"""The compile's judge choice: each judgment measured by its training record's ``measure``, on
each set's LM dev rows, and the best candidate kept (ties to the cheaper)."""

from __future__ import annotations

from optimize.judge_choice import choose
from program.judgments import PASSAGE, STRIP, SUPPORT
from tests.test_judges import toy_judges


def figures(by_set: dict, seen: list):
    def measure(judges, rows, thresholds, set_name):
        seen.append((set_name, len(rows), thresholds is not None))
        return dict(by_set[set_name])
    return measure


def test_each_judgment_is_chosen_by_the_mean_of_its_sets_and_ties_go_to_the_cheaper():
    judges, seen = toy_judges(), []
    measures = {PASSAGE: figures({"adversarial": {"lm": 0.9, "trained": 0.5, "cascade": 0.7},
                                  "popqa": {"lm": 0.5, "trained": 0.7, "cascade": 0.6}}, seen),
                STRIP: figures({"adversarial": {"lm": 0.6, "trained": 0.6, "cascade": 0.6}}, seen),
                SUPPORT: figures({}, seen)}
    report, chosen = choose(judges, {"grading": [1, 2, 3], "strips": [1, 2]}, {"grading": [1]}, measures=measures)
    assert report["passage"]["chosen"] == "lm" and report["passage"]["lm"] == 0.7 and report["passage"]["dev_rows"] == 4
    assert report["strip"]["chosen"] == "trained"  # a three-way tie: the cheapest
    assert report["support"] == {"chosen": "trained", "dev_rows": 0, "note": "LM not measured in this compile"}
    assert [chosen.choice(j).use for j in (PASSAGE, STRIP, SUPPORT)] == ["lm", "trained", "trained"]
    assert judges.choices == toy_judges().choices  # the judges given are left as they were
    assert seen == [("adversarial", 3, True), ("popqa", 1, True), ("adversarial", 2, True)]
