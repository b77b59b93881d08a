"""The LM passage-score measurement: calibrated and batch-calibrated scores, per query, on a labeled domain."""

from __future__ import annotations

import pandas as pd
import pytest

from experiments import lm_calibration
from signatures import GradeRetrieval


def test_scores_are_calibrated_by_the_random_chunks_and_by_the_batch(fake_lm):
    # the fake grader: every chunk names the entity; a chunk of more than 600 characters answers
    fake_lm.rules[GradeRetrieval] = lambda i: {"same_entity": True, "answers_question": len(i["passage"]) > 600,
                                               "outdated": False}
    summary, rows = lm_calibration.measure("adversarial", "test", limit=2, n_random=1)  # the smallest domain to index
    frame = pd.DataFrame(rows)
    assert summary["queries"] == 2 and summary["passages"] == len(frame) == 10
    assert set(frame.lm) <= {0.4, 1.0}  # booleans read through score_grade: 0.4 entity only, 1.0 both
    assert frame.lm_calibrated.round(4).tolist() == (frame.lm - frame.random_mean).round(4).tolist()
    batch = frame.lm - frame.groupby("query").lm.transform("mean")
    assert frame.lm_batch.round(4).tolist() == batch.round(4).tolist()
    assert "trained" in frame and frame.trained.between(0, 1).all()
    assert fake_lm.calls["GradeRetrieval"] == 12  # 5 top chunks and 1 random chunk per query
    for name in ("lm", "lm_calibrated", "trained"):
        assert set(summary[name]) == {"passage_auc", "query_auc"}


@pytest.mark.parametrize("argv, message", [
    (["--set", "nosuch"], "error: --set 'nosuch' is not a labeled domain; choose from adversarial, kubernetes, "
                          "handbook, owasp"),
    (["--set", "kubernetes", "--limit", "-1"], "error: --limit and --random must be 0 or more"),
])
def test_bad_arguments_are_one_line(argv, message, capsys):
    assert lm_calibration.main(argv) == 2
    assert capsys.readouterr().err.strip() == message
