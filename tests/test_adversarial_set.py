"""The hand-labeled adversarial set: valid, big enough, loadable, and its validator catches breakage."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import dspy
import pytest

from eval_sets import adversarial
from eval_sets.adversarial import validate as v

SET_DIR = Path(adversarial.__file__).resolve().parent


def _rows(kind: str) -> list[dict]:
    return adversarial.load_rows(kind)


def test_validator_passes_on_the_real_set(capsys):
    report = v.validate()
    assert report.ok, "\n".join(report.problems)
    assert v.main([]) == 0
    out = capsys.readouterr().out
    assert "OK: the adversarial set is valid." in out
    assert "grading.jsonl" in out and "queries.jsonl" in out


def test_minimum_counts_and_coverage():
    grading = _rows("grading")
    assert len(grading) >= 16
    assert set(Counter(r["reason"] for r in grading)) == set(v.REASONS)
    # hard negatives from PopQA: same-name different entity, graded irrelevant
    assert sum(r["reason"] == "irrelevant" and r["source"].startswith("popqa") for r in grading) >= 3

    strips = _rows("strips")
    assert len(strips) >= 14
    assert any(not r["relevant"] for r in strips)
    assert any(r["relevant"] for r in strips)

    assert len(_rows("rewrite")) >= 12

    support = Counter(r["support"] for r in _rows("support"))
    assert sum(support.values()) >= 16
    assert set(support) == set(v.SUPPORT)
    assert max(support.values()) - min(support.values()) <= 2, support

    answers = _rows("answers")
    assert len(answers) >= 10
    assert any(any("don't know" in g for g in r["gold_answers"]) for r in answers)
    assert any("ignore" in " ".join(r["context"]).lower() and "instructions" in " ".join(r["context"]).lower()
               for r in answers)

    queries = _rows("queries")
    assert len(queries) >= 20
    assert set(r["category"] for r in queries) == set(v.CATEGORIES)
    assert set(r["expected_action"] for r in queries) == set(v.ACTIONS)

    component = sum(len(_rows(k)) for k in adversarial.KINDS if k != "queries")
    assert component >= 80  # "well over 40", spread over every predictor


@pytest.mark.parametrize("kind", adversarial.KINDS)
def test_splits_are_about_60_40_and_every_label_is_in_both(kind):
    rows = _rows(kind)
    train = sum(r["split"] == "train" for r in rows)
    assert 0.5 <= train / len(rows) <= 0.7, (kind, train, len(rows))
    field = {"grading": "reason", "support": "support", "queries": "category"}.get(kind)
    if field:
        for label in {r[field] for r in rows}:
            assert {r["split"] for r in rows if r[field] == label} == {"train", "dev"}, (kind, label)


def test_knowledge_base_has_the_adversarial_features():
    kb = adversarial.load_kb()
    assert 18 <= len(kb) <= 25
    injected = [d for d, t in kb.items() if "ignore" in t.lower() and "previous instructions" in t.lower()]
    assert len(injected) >= 2, injected
    assert "DEPRECATED" in kb["api-keys-v1-deprecated"]
    assert "ARCHIVED" in kb["fees-2022-archived"]
    assert "Lane Capital" in kb["lane-capital-financing"] and "Lane Capital" in kb["lane-capital-bank-partner"]
    assert adversarial.KB_DIR.is_dir()


def test_loader_api():
    train = adversarial.load_examples("grading", "train")
    assert train and all(isinstance(e, dspy.Example) for e in train)
    assert set(train[0].inputs().keys()) == {"question", "passage"}
    assert {"reason", "relevance"} <= set(train[0].labels().keys())
    for kind, inputs in adversarial.INPUTS.items():
        ex = adversarial.load_examples(kind)[0]
        assert set(ex.inputs().keys()) == set(inputs)
    every = adversarial.load_rows("support")
    assert len(every) == len(adversarial.load_rows("support", "train")) + len(adversarial.load_rows("support", "dev"))
    with pytest.raises(ValueError, match="grading"):
        adversarial.load_rows("nonsense")
    with pytest.raises(ValueError):
        adversarial.load_rows("grading", "test")


@pytest.fixture
def broken_copy(tmp_path):
    dest = tmp_path / "adversarial"
    shutil.copytree(SET_DIR / "kb", dest / "kb")
    for kind in adversarial.KINDS:
        shutil.copy(SET_DIR / f"{kind}.jsonl", dest / f"{kind}.jsonl")
    return dest


def _rewrite(path: Path, edit) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = edit(rows)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_the_copy_itself_is_valid(broken_copy):
    report = v.validate(broken_copy)
    assert report.ok, report.problems


def test_validator_catches_a_duplicate_id(broken_copy, capsys):
    first_grading_id = _rows("grading")[0]["id"]

    def dup(rows):
        rows[-1] = dict(rows[-1], id=first_grading_id)  # an id used in another file
        return rows

    _rewrite(broken_copy / "support.jsonl", dup)
    report = v.validate(broken_copy)
    assert any("duplicate id" in p and first_grading_id in p for p in report.problems), report.problems
    assert v.main([str(broken_copy)]) == 1
    assert "duplicate id" in capsys.readouterr().err


def test_validator_catches_a_dangling_doc_id(broken_copy, capsys):
    def dangle(rows):
        rows[0] = dict(rows[0], relevant_doc_ids=["no-such-doc"])
        return rows

    _rewrite(broken_copy / "queries.jsonl", dangle)
    report = v.validate(broken_copy)
    assert any("no-such-doc" in p and "kb/" in p for p in report.problems), report.problems
    assert v.main([str(broken_copy)]) == 1
    assert "no-such-doc" in capsys.readouterr().err


def test_validator_catches_bad_labels(broken_copy):
    def bad_strip(rows):
        rows[0] = dict(rows[0], relevant=[0, 99])
        return rows

    def bad_reason(rows):
        rows[0] = dict(rows[0], reason="maybe")
        rows[1] = dict(rows[1], split="test")
        return rows

    _rewrite(broken_copy / "strips.jsonl", bad_strip)
    _rewrite(broken_copy / "grading.jsonl", bad_reason)
    (broken_copy / "kb" / "refunds.md").unlink()  # queries and rewrite rows point at it
    problems = "\n".join(v.validate(broken_copy).problems)
    assert "strip number 0 out of range" in problems and "strip number 99 out of range" in problems
    assert "reason must be one of" in problems
    assert "split must be one of" in problems
    assert "'refunds'" in problems
