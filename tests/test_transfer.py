"""The leave-one-domain-out transfer run: judges fitted on chosen sources, measured on a domain."""

from __future__ import annotations

import json

import pytest

from eval_sets.domains import DOMAINS, load_rows
from optimize import transfer
from optimize.judge_sources import domain_source, fit_judges


@pytest.fixture(scope="module")
def help_centre(embedder):
    from program import resources

    kb = resources.knowledge_base(DOMAINS["adversarial"].kb_dir)
    return kb, domain_source("adversarial", kb, embedder)


def test_a_domain_source_holds_its_training_rows_only(help_centre):
    _, source = help_centre
    train = {r["id"] for k in ("grading", "queries", "strips", "support") for r in load_rows("adversarial", k, "train")}
    groups = set(source.passage.groups) | set(source.strip.groups) | set(source.support.groups)
    assert groups <= train
    assert set(source.expected) == {r["id"] for r in load_rows("adversarial", "queries", "train") if r["needs_retrieval"]}


def test_judges_fitted_with_the_labels_calibrate_that_knowledge_base(help_centre, embedder):
    kb, source = help_centre
    judges = fit_judges([source], embedder, log=lambda m: None)
    own = judges.thresholds_for(kb)
    assert 0.05 <= own["lower"] <= own["upper"] <= 0.95
    assert 0.05 <= judges.thresholds["support_partially"] <= judges.thresholds["support_fully"] <= 0.95
    figures = transfer.measure_domain(judges, "adversarial", kb, embedder)
    asked = [r for r in load_rows("adversarial", "queries", "test") if r["needs_retrieval"]]
    assert figures["rows"]["queries"] == len(asked)
    assert figures["rows"]["passages"] == 5 * len(asked)
    assert figures["splits"] == {"queries": "test", "strips": "test", "support": "test"}
    assert sum(sum(row.values()) for row in figures["confusion"].values()) == len(asked)
    for name in transfer.FIGURES:
        assert 0.0 <= figures[name] <= 1.0, name


def test_fit_judges_needs_a_source():
    with pytest.raises(ValueError, match="at least one source"):
        fit_judges([])


def test_the_summary_is_written_whole_and_tabled(tmp_path):
    summary = {"kubernetes": {f: {"labels_out": 0.5, "labels_in": 0.75} for f in transfer.FIGURES}}
    summary["kubernetes"]["rows"] = {"queries": 120}
    path = transfer.write_summary(summary, tmp_path, {"command": "python -m optimize.transfer"})
    saved = json.loads(path.read_text())
    assert saved["kubernetes"]["strip_f1"] == {"labels_out": 0.5, "labels_in": 0.75}
    assert list(tmp_path.iterdir()) == [path]
    assert "| kubernetes | 0.500 / 0.750 | 0.500 / 0.750 | 0.500 / 0.750 | 0.500 / 0.750 | 120 |" in transfer.format_table(summary)


def test_an_unknown_domain_exits_2(capsys):
    assert transfer.main(["--domains", "kubernetes,nosuch"]) == 2
    assert "unknown domain(s) ['nosuch']" in capsys.readouterr().err
