"""`python -m optimize.compile` end to end on the fake LM: every predictor measured, thresholds saved."""

from __future__ import annotations

import json

import pytest

from optimize import compile as compile_mod
from program.app.configuration import load_compiled
from signatures import (CheckClaimSupport, DecideRetrieval, GenerateAnswer, GradeRetrieval, RewriteQuery,
                        StandaloneQuestion, StripRelevance)
from tests.conftest import ListKnowledgeBase
from tests.fake_lm import FakeLM, parse_list

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop


def rules():
    """A fake model that grades everything relevant, copies the strip, quotes the evidence."""
    return {
        GradeRetrieval: lambda i: {"same_entity": True, "answers_question": True, "outdated": False},
        StripRelevance: lambda i: {"answer_span": i["strip"]},
        RewriteQuery: lambda i: {"query": i["question"]},
        CheckClaimSupport: lambda i: {"quote": i["evidence"].split(". ")[0]},
        GenerateAnswer: lambda i: {"answer": parse_list(i["context"])[0][4:] + " [1]"},
        # right on the chit-chat rows, wrong on one question needing retrieval
        DecideRetrieval: lambda i: {"needs_retrieval": not i["question"].startswith(
            ("Hi", "Thanks", "What is", "Can you make", "Translate", "Summarise", "How long is a key"))},
        StandaloneQuestion: lambda i: {"standalone_question": i["followup"]},  # the follow-up unchanged
    }


@pytest.fixture
def fake_compile(monkeypatch):
    lm = FakeLM(rules())
    monkeypatch.setattr(compile_mod, "configure_lm", lambda model=None, api_base=None: lm)
    # training the judges reads the whole PopQA train split (minutes): tests/test_train_judges.py
    # covers it; here a toy judge set stands in, and PopQA's LM rows are left out
    monkeypatch.setattr(compile_mod, "build_judges", lambda kb: toy_judges_with_figures())
    monkeypatch.setattr(compile_mod, "popqa_rows_for", lambda program: {})
    monkeypatch.setattr(compile_mod, "knowledge_base", _adversarial_only(compile_mod))
    from tests.test_judges import WordEmbedder

    monkeypatch.setattr(compile_mod, "embedder", WordEmbedder)  # judges reloaded from --out score with it
    # refinement's recall reads PopQA's knowledge base (minutes): tests/test_refinement.py covers it
    lm.refinement_measured = []
    monkeypatch.setattr(compile_mod, "measure_refinement", lambda judges, out: lm.refinement_measured.append(out))
    return lm


def toy_judges_with_figures():
    from tests.test_judges import toy_judges

    judges = toy_judges()
    judges.figures = {"adversarial_dev": {"action_accuracy": 0.5}}
    return judges


def _adversarial_only(compile_mod):
    from program.app import resources

    def knowledge_base(source=None):
        assert source is not None, "the compile under test must not build the PopQA knowledge base"
        return resources.knowledge_base(source)

    return knowledge_base


def test_compile_measures_every_predictor_and_saves(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert set(manifest["metrics_dev"]) == {"grading", "strips", "rewrite", "support", "answers", "deciding",
                                            "followups"}
    # the follow-up left unchanged shares with the hand-written question only the words they have in common
    assert 0.2 < manifest["metrics_dev"]["followups"]["before"] < 0.8
    for figures in manifest["metrics_dev"].values():
        assert 0.0 <= figures["before"] <= 1.0 and 0.0 <= figures["after"] <= 1.0
        assert figures["kept"] in ("compiled", "uncompiled")
        # a compiled predictor is kept only when it is not worse on dev
        assert figures["kept"] == "uncompiled" or figures["after"] >= figures["before"]
    # grading everything "relevant" scores 1 on the dev rows labeled relevant, 0.5 on the other
    # rows in the "correct" band, 0 elsewhere
    from eval_sets.adversarial import load_rows
    from optimize.predictor_metrics import LM_LOWER, LM_UPPER
    from program.stages.decision import evaluator_action

    dev = compile_mod.sample_rows(load_rows("grading", "dev"), compile_mod.BUDGETS["light"][1])
    expected = sum(1.0 if r["reason"] == "relevant" else
                   0.5 * (evaluator_action(r["relevance"], LM_LOWER, LM_UPPER) == "correct") for r in dev)
    assert manifest["metrics_dev"]["grading"]["before"] == round(expected / len(dev), 4)
    t = manifest["thresholds"]
    assert 0 < t["lower"] <= t["upper"] <= 1
    assert manifest["lm"] == "fake/rules" and manifest["dspy_version"].startswith("3.4")
    program = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([]), web=None, embedder=None)
    assert (program.settings.upper, program.settings.lower) == (t["upper"], t["lower"])


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


def test_new_test_rows_do_not_outdate_a_compile_but_new_train_rows_do(tmp_path):
    # the help centre's test split grew by 120 rows, and --only refused every saved compile
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "fees.md").write_text("# Fees\n\n2.7% per charge.\n")
    rows = tmp_path / "queries.jsonl"
    rows.write_text('{"id": "q1", "split": "train", "question": "Fee?"}\n')
    before = compile_mod.data_hash(tmp_path)
    rows.write_text(rows.read_text() + '{"id": "q2", "split": "test", "question": "Fee now?"}\n')
    assert compile_mod.data_hash(tmp_path) == before
    rows.write_text(rows.read_text() + '{"id": "q3", "split": "dev", "question": "Fee later?"}\n')
    assert compile_mod.data_hash(tmp_path) != before


def test_label_span_writes_a_strip_label_as_the_signatures_output():
    from program.stages.refine import score_span

    strip = ("Michael Hutchings (born 1949) is a professional chef who is best known "
             "as the chef/owner of Michael's Waterside.")
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
    assert [e.relevant for e in examples[: len(first["strips"])]] == [i in first["relevant"]
                                                                      for i in range(1, len(first["strips"]) + 1)]
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
        {k: min(16, len(load_rows(k, "dev"))) for k in ("grading", "rewrite", "support", "answers")} | \
        {"deciding": 16, "followups": 16}
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
    ok, why = compile_mod.may_overwrite(saved | {"metrics_dev": {k: m | {"dev": 99}
                                                                 for k, m in saved["metrics_dev"].items()}},
                                        tmp_path, force=False)
    assert ok and why == "the saved compile was measured on other dev rows"


def test_decision_examples_keep_every_chit_chat_row_and_balance_the_train_split():
    train = compile_mod.labeled_examples("deciding", "train")
    assert [e.needs_retrieval for e in train].count(False) == 4 and len(train) == 8
    dev = compile_mod.labeled_examples("deciding", "dev", 16)
    assert len(dev) == 16 and [e.question for e in dev if not e.needs_retrieval] == [
        "Thanks, that was really helpful!", "Translate 'thank you' into French."]
    assert len(compile_mod.labeled_examples("deciding", "dev")) == 43
    assert list(dev[0].inputs().keys()) == ["question"]


def test_decider_figures_are_balanced_accuracy_and_needless_skips():
    from types import SimpleNamespace as NS

    from optimize.predictor_metrics import decision_accuracy, decision_figures

    examples = [NS(needs_retrieval=True)] * 4 + [NS(needs_retrieval=False)] * 2
    preds = [NS(needs_retrieval=v) for v in (True, True, True, False, False, True)]
    results = [(e, p, decision_accuracy(e, p)) for e, p in zip(examples, preds)]
    figures = decision_figures(results)
    # accuracy 4 of 6; 3 of 4 retrieve and 1 of 2 skips: balanced (0.75 + 0.5) / 2
    assert figures == {"primary": 0.6667, "accuracy": 0.6667, "balanced_accuracy": 0.625, "needless_skips": 1,
                       "right_skips": 1, "needs_retrieval": 4, "chit_chat": 2}
    # a decider that never skips is as accurate here, and its balanced accuracy says it skips nothing
    never = [(e, NS(needs_retrieval=True), decision_accuracy(e, NS(needs_retrieval=True))) for e in examples]
    assert decision_figures(never)["primary"] == 0.6667 and decision_figures(never)["balanced_accuracy"] == 0.5
    assert decision_accuracy(NS(needs_retrieval=True), NS(needs_retrieval="unparsed")) == 1.0


def test_the_decider_is_compiled_and_loaded_only_when_the_option_is_on(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    figures = json.loads((tmp_path / "manifest.json").read_text())["metrics_dev"]["deciding"]
    # the fake decider misreads "How long is a key valid?" (dev) as chit-chat
    assert (figures["dev_before"]["right_skips"], figures["dev_before"]["needless_skips"]) == (2, 1)
    state = json.loads((tmp_path / "crag.json").read_text())
    on = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([]), web=None, embedder=None, decide_retrieval=True)
    assert len(on.decider.demos) == len(state["decider"]["demos"])
    off = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([]), web=None, embedder=None)
    assert off.decider is None and len(off.refiner.grade.demos) == len(state["refiner.grade"]["demos"])


def test_only_recompiles_the_named_predictors_and_keeps_the_rest(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    path = tmp_path / "manifest.json"
    saved = json.loads(path.read_text())
    saved["metrics_dev"]["strips"]["after"] = 0.123  # a mark the partial compile must keep
    saved["thresholds"]["upper"] = 0.75
    saved["judges"]["data_hash"] = "judges-kept"  # reused, not trained: their hash is the saved one's
    path.write_text(json.dumps(saved))
    state_before = json.loads((tmp_path / "crag.json").read_text())
    fake_compile.calls.clear()
    assert compile_mod.main(["--out", str(tmp_path), "--only", "deciding", "--dev-rows", "0", "--force"]) == 0
    assert set(fake_compile.calls) == {"DecideRetrieval"}
    # the judges were trained by the first compile only: refinement measured then, not again
    assert fake_compile.refinement_measured == [str(tmp_path)]
    manifest = json.loads(path.read_text())
    assert manifest["metrics_dev"]["strips"]["after"] == 0.123 and manifest["thresholds"]["upper"] == 0.75
    assert manifest["judges"]["data_hash"] == "judges-kept"
    assert manifest["metrics_dev"]["deciding"]["dev"] == 43 and set(manifest["recompiled"]) == {"deciding"}
    assert manifest["dev_rows"] == saved["dev_rows"] and list(manifest["metrics_dev"]) == list(saved["metrics_dev"])
    # a saved compile that did not record its dev rows does not get this run's
    del saved["dev_rows"]
    path.write_text(json.dumps(saved))
    assert compile_mod.main(["--out", str(tmp_path), "--only", "deciding", "--dev-rows", "0", "--force"]) == 0
    assert "dev_rows" not in json.loads(path.read_text())
    state = json.loads((tmp_path / "crag.json").read_text())
    assert {k: v for k, v in state.items() if k not in ("decider", "metadata")} == \
        {k: v for k, v in state_before.items() if k not in ("decider", "metadata")}


def test_only_refuses_an_unknown_predictor_and_a_folder_with_nothing_compiled(tmp_path, fake_compile):
    with pytest.raises(SystemExit):
        compile_mod.main(["--out", str(tmp_path), "--only", "deciding,spelling"])
    with pytest.raises(SystemExit):
        compile_mod.main(["--out", str(tmp_path / "empty"), "--only", "deciding"])
    assert not (tmp_path / "empty").exists()


def test_only_judges_measures_the_saved_lm_predictors_for_the_choice(tmp_path, fake_compile):
    assert compile_mod.main(["--out", str(tmp_path)]) == 0
    fake_compile.calls.clear()
    assert compile_mod.main(["--out", str(tmp_path), "--only", "judges", "--force"]) == 0
    # no predictor compiled: only the three judgments' LM predictors measured on their dev rows
    assert set(fake_compile.calls) == {"GradeRetrieval", "StripRelevance", "CheckClaimSupport"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    for judgment in ("passage", "strip", "support"):
        choice = manifest["judges"]["choice"][judgment]
        assert choice["chosen"] in ("lm", "trained", "cascade") and choice["dev_rows"] > 0
        assert set(choice["by_set"]) == {"adversarial"}  # PopQA's LM rows are left out in these tests
    assert (tmp_path / "judges.json").exists()
