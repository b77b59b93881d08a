"""`python -m optimize.compile` end to end on the fake LM: every predictor measured, thresholds saved."""

from __future__ import annotations

import json

import pytest

from optimize import compile as compile_mod
from program.compiled import load_compiled
from signatures import (
    CheckClaimSupport,
    GenerateAnswer,
    GradeRetrieval,
    RewriteQuery,
    StripRelevance,
)
from tests.conftest import ListKnowledgeBase
from tests.fake_lm import FakeLM, parse_list


def rules():
    """A fake model that grades everything relevant, copies the strip, quotes the evidence."""
    return {
        GradeRetrieval: lambda i: {"same_entity": True, "answers_question": True, "outdated": False},
        StripRelevance: lambda i: {"answer_span": i["strip"]},
        RewriteQuery: lambda i: {"query": i["question"]},
        CheckClaimSupport: lambda i: {"quote": i["evidence"].split(". ")[0]},
        GenerateAnswer: lambda i: {"answer": parse_list(i["context"])[0][4:] + " [1]"},
    }


@pytest.fixture
def fake_compile(monkeypatch):
    lm = FakeLM(rules())
    monkeypatch.setattr(compile_mod, "configure_lm", lambda model=None, api_base=None: lm)
    return lm


def test_compile_measures_every_predictor_and_saves(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["metrics_dev"]) == {"grading", "strips", "rewrite", "support", "answers"}
    for figures in manifest["metrics_dev"].values():
        assert 0.0 <= figures["before"] <= 1.0 and 0.0 <= figures["after"] <= 1.0
        assert figures["kept"] in ("compiled", "uncompiled")
        # a compiled predictor is kept only when it is not worse on dev
        assert figures["kept"] == "uncompiled" or figures["after"] >= figures["before"]
    # grading everything "relevant" scores 1 on the dev rows labeled relevant, 0.5 on the other
    # rows in the "correct" band, 0 elsewhere
    from eval_sets.adversarial import load_rows
    from optimize.predictor_metrics import grade_band

    dev = compile_mod.sample_rows(load_rows("grading", "dev"), compile_mod.BUDGETS["light"][1])
    expected = sum(1.0 if r["reason"] == "relevant" else 0.5 * (grade_band(r["relevance"]) == "correct") for r in dev)
    assert manifest["metrics_dev"]["grading"]["before"] == round(expected / len(dev), 4)
    t = manifest["thresholds"]
    assert 0 < t["lower"] <= t["upper"] <= 1
    assert manifest["lm"] == "fake/rules" and manifest["dspy_version"].startswith("3.4")
    program = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([]), web=None, embedder=None)
    assert (program.upper, program.lower) == (t["upper"], t["lower"])


def test_rewrite_demos_are_bootstrapped_not_raw_labels(tmp_path, fake_compile):
    compile_mod.main(["--out", str(tmp_path)])
    state = json.loads((tmp_path / "crag.json").read_text())
    for demo in state["web_searcher.rewrite"]["demos"]:
        assert "query" in demo  # a raw labeled row has expert_terms and no query


def test_a_worse_compile_does_not_replace_the_saved_one_without_force(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    path = tmp_path / "manifest.json"
    saved = json.loads(path.read_text())
    for figures in saved["metrics_dev"].values():  # pretend the saved compile was perfect on dev
        figures.update(before=1.0, after=1.0)
    saved["thresholds"]["dev_action_accuracy"] = 1.0
    path.write_text(json.dumps(saved))
    assert compile_mod.main(["--out", str(tmp_path)]) == 3
    assert json.loads(path.read_text()) == saved
    assert compile_mod.main(["--out", str(tmp_path), "--force"]) == 0
    assert json.loads(path.read_text())["dev_score"] < 1.0


def test_another_lm_or_data_set_is_not_comparable(tmp_path):
    manifest = {"lm": "a", "data_hash": "x", "thresholds": {"dev_action_accuracy": 0.0},
                "metrics_dev": {"grading": {"before": 0.0, "after": 0.1, "kept": "compiled"}}}
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "thresholds": {"dev_action_accuracy": 1.0}}))
    assert compile_mod.may_overwrite(manifest, tmp_path, force=False)[0] is False
    assert compile_mod.may_overwrite({**manifest, "data_hash": "y"}, tmp_path, force=False) == (
        True, "the saved compile used another LM or other data")
    assert compile_mod.dev_score(manifest) == 0.05


def test_label_span_writes_a_strip_label_as_the_signatures_output():
    from program.refine import score_span

    strip = "Michael Hutchings (born 1949) is a professional chef who is best known as the chef/owner of Michael's Waterside."
    span = compile_mod.label_span(strip, True)
    assert span == "Michael Hutchings (born 1949) is a professional chef who is best known"
    assert score_span(span, strip) == 1.0
    assert compile_mod.label_span(strip, False) == "NONE" and score_span("NONE", strip) == 0.0


def test_strip_examples_are_one_per_strip_with_their_label():
    from eval_sets.adversarial import load_rows

    rows = load_rows("strips", "dev")
    examples = compile_mod.labeled_examples("strips", "dev")
    assert len(examples) == sum(len(r["strips"]) for r in rows)
    first = rows[0]
    assert [e.relevant for e in examples[: len(first["strips"])]] == [i in first["relevant"] for i in range(1, len(first["strips"]) + 1)]
    assert all((e.answer_span == "NONE") != e.relevant for e in examples)
    # the light budget's sample counts strip rows, not strips
    assert len({e.question for e in compile_mod.labeled_examples("strips", "dev", 5)}) <= 5


def test_strip_demos_add_labeled_examples_to_the_bootstrapped_ones(tmp_path, fake_compile):
    compile_mod.main(["--out", str(tmp_path), "--force"])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    strips = manifest["metrics_dev"]["strips"]
    state = json.loads((tmp_path / "crag.json").read_text())
    demos = state["refiner.grade"]["demos"]
    if strips["kept"] == "compiled":
        # light budget: 2 bootstrapped + 2 labeled demos, each with the output field filled
        assert len(demos) == 4 and all(d.get("answer_span") for d in demos)
    else:
        assert demos == []


def test_sample_rows_is_seeded_and_keeps_the_order():
    rows = list(range(68))
    sample = compile_mod.sample_rows(rows, 24)
    assert len(sample) == 24 and sample == sorted(sample) and sample == compile_mod.sample_rows(rows, 24)
    assert compile_mod.sample_rows(rows, None) == rows and compile_mod.sample_rows(rows[:11], 24) == rows[:11]


def test_light_budget_measures_at_most_16_dev_rows_per_predictor(tmp_path, fake_compile):
    from eval_sets.adversarial import load_rows

    compile_mod.main(["--out", str(tmp_path), "--force"])
    metrics = json.loads((tmp_path / "manifest.json").read_text())["metrics_dev"]
    assert {k: m["dev"] for k, m in metrics.items() if k != "strips"} == \
        {k: min(16, len(load_rows(k, "dev"))) for k in ("grading", "rewrite", "support", "answers")}
    # strips: 16 strip rows, one example per strip
    assert metrics["strips"]["dev"] == len(compile_mod.labeled_examples("strips", "dev", 16)) < \
        len(compile_mod.labeled_examples("strips", "dev"))
    compile_mod.main(["--out", str(tmp_path), "--force", "--dev-rows", "0"])
    metrics = json.loads((tmp_path / "manifest.json").read_text())["metrics_dev"]
    assert metrics["support"]["dev"] == len(load_rows("support", "dev"))


def test_a_compile_measured_on_other_dev_rows_is_not_comparable(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    path = tmp_path / "manifest.json"
    saved = json.loads(path.read_text())
    for figures in saved["metrics_dev"].values():
        figures.update(before=1.0, after=1.0)
    path.write_text(json.dumps(saved))
    ok, why = compile_mod.may_overwrite(saved | {"metrics_dev": {k: m | {"dev": 99} for k, m in saved["metrics_dev"].items()}},
                                        tmp_path, force=False)
    assert ok and why == "the saved compile was measured on other dev rows"
