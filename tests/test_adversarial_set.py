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
    assert len(grading) >= 80
    assert set(Counter(r["reason"] for r in grading)) == set(v.REASONS)
    # hard negatives from PopQA: same-name different entity, graded irrelevant
    assert sum(r["reason"] == "irrelevant" and r["source"].startswith("popqa") for r in grading) >= 3

    strips = _rows("strips")
    assert len(strips) >= 200
    assert sum(r["source"].startswith("popqa") for r in strips) >= 40
    assert any(not r["relevant"] for r in strips) and any(r["relevant"] for r in strips)
    n = sum(len(r["strips"]) for r in strips)
    assert 0.33 <= sum(len(r["relevant"]) for r in strips) / n <= 0.6

    assert len(_rows("rewrite")) >= 50

    support_rows = _rows("support")
    support = Counter(r["support"] for r in support_rows)
    assert sum(support.values()) >= 200
    assert sum(r["source"].startswith("popqa") for r in support_rows) >= 40
    assert set(support) == set(v.SUPPORT)
    assert min(support.values()) / sum(support.values()) >= 0.25, support

    answers = _rows("answers")
    assert len(answers) >= 40
    assert any(any("don't know" in g for g in r["gold_answers"]) for r in answers)
    assert any("ignore" in " ".join(r["context"]).lower() and "instructions" in " ".join(r["context"]).lower()
               for r in answers)

    queries = _rows("queries")
    assert len(queries) >= 150
    assert set(r["category"] for r in queries) == set(v.CATEGORIES) - {"plain"}  # plain: the newer domains
    assert set(r["expected_action"] for r in queries) == set(v.ACTIONS)
    chit_chat = [r for r in queries if r["category"] == "chit-chat"]
    assert len(chit_chat) >= 6 and all(r["needs_retrieval"] is False for r in chit_chat)
    assert all(r["needs_retrieval"] is True for r in queries if r["category"] != "chit-chat")
    answerable = [r for r in queries if r["answerable"] and r["relevant_doc_ids"]]
    assert all(r["relevant_chunk_ids"] for r in answerable)


@pytest.mark.parametrize("kind", adversarial.KINDS)
def test_splits_are_about_50_25_25_and_every_label_is_in_each(kind):
    rows = _rows(kind)
    share = Counter(r["split"] for r in rows)
    assert set(share) == set(v.SPLITS), (kind, share)
    if kind == "queries":  # the test split grew to 150+ queries, so that one question is under a point
        assert share["test"] >= 150 and share["train"] >= 2 * share["dev"] * 0.8, share
    else:
        assert 0.45 <= share["train"] / len(rows) <= 0.6, (kind, share)
        assert 0.18 <= share["dev"] / len(rows) <= 0.32 and 0.18 <= share["test"] / len(rows) <= 0.32, (kind, share)
    field = {"grading": "reason", "support": "support", "queries": "category"}.get(kind)
    if field:
        for label in {r[field] for r in rows}:
            assert {r["split"] for r in rows if r[field] == label} == set(v.SPLITS), (kind, label)


def test_knowledge_base_has_the_adversarial_features():
    kb = adversarial.load_kb()
    assert 60 <= len(kb) <= 100
    injected = [d for d, t in kb.items() if "ignore" in t.lower() and "previous instructions" in t.lower()]
    assert len(injected) >= 3, injected
    assert "DEPRECATED" in kb["api-keys-v1-deprecated"] and "DEPRECATED" in kb["checkout-v1-deprecated"]
    assert "ARCHIVED" in kb["fees-2022-archived"] and "ARCHIVED" in kb["payouts-2021-archived"]
    assert "Lane Capital" in kb["lane-capital-financing"] and "Lane Capital" in kb["lane-capital-bank-partner"]
    assert "Relay" in kb["relay-cli"] and "Relay" in kb["relay-payouts"]
    assert adversarial.KB_DIR.is_dir()


def test_references_resolve():
    report = v.validate()
    docs = set(report.kb_docs)
    for r in _rows("queries"):
        assert set(r["relevant_doc_ids"]) <= docs, r["id"]
        assert set(r["relevant_chunk_ids"]) <= report.chunk_ids, r["id"]
        assert {c.split("#")[0] for c in r["relevant_chunk_ids"]} <= set(r["relevant_doc_ids"]), r["id"]


def test_loader_api():
    train = adversarial.load_examples("grading", "train")
    assert train and all(isinstance(e, dspy.Example) for e in train)
    assert set(train[0].inputs().keys()) == {"question", "passage"}
    assert {"reason", "relevance"} <= set(train[0].labels().keys())
    for kind, inputs in adversarial.INPUTS.items():
        ex = adversarial.load_examples(kind)[0]
        assert set(ex.inputs().keys()) == set(inputs)
        assert adversarial.load_rows(kind, "test")
    every = adversarial.load_rows("support")
    assert len(every) == sum(len(adversarial.load_rows("support", s)) for s in adversarial.SPLITS)
    with pytest.raises(ValueError, match="grading"):
        adversarial.load_rows("nonsense")
    with pytest.raises(ValueError):
        adversarial.load_rows("grading", "validation")


def test_needs_retrieval_defaults_to_true(tmp_path):
    (tmp_path / "queries.jsonl").write_text(json.dumps({"id": "q", "split": "dev", "question": "x"}) + "\n")
    assert adversarial.load_rows("queries", directory=tmp_path)[0]["needs_retrieval"] is True


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
        rows[1] = dict(rows[1], split="holdout")
        return rows

    _rewrite(broken_copy / "strips.jsonl", bad_strip)
    def dangling_chunk(rows):
        rows[0] = dict(rows[0], relevant_chunk_ids=[rows[0]["relevant_doc_ids"][0] + "#99"])
        return rows

    _rewrite(broken_copy / "grading.jsonl", bad_reason)
    _rewrite(broken_copy / "queries.jsonl", dangling_chunk)
    (broken_copy / "kb" / "refunds.md").unlink()  # queries and rewrite rows point at it
    problems = "\n".join(v.validate(broken_copy).problems)
    assert "strip number 0 out of range" in problems and "strip number 99 out of range" in problems
    assert "reason must be one of" in problems
    assert "split must be one of" in problems
    assert "'refunds'" in problems
    assert "#99' is not a chunk of kb/" in problems
