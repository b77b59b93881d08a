"""The labeled domains: each loads, has its split sizes and passes its validator; one runs end to end."""

from __future__ import annotations

import csv
import functools
import json
from collections import Counter

import pytest

from eval_sets.adversarial.validate import validate
from eval_sets.domains import DOMAINS, Domain, domain, load_rows
from optimize import evaluate
from optimize.eval_data import load_set

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

NEW = ("kubernetes", "handbook")


@pytest.mark.parametrize("name", NEW)
def test_a_new_domain_has_its_documents_and_split_sizes(name):
    d = domain(name)
    assert 80 <= len(list(d.kb_dir.glob("*.md"))) <= 150
    queries = load_rows(name, "queries")
    splits = Counter(r["split"] for r in queries)
    assert len(queries) >= 200 and splits["test"] >= 120 and splits["train"] >= 40 and splits["dev"] >= 25, splits
    assert sum(not r["answerable"] for r in queries) >= len(queries) / 4
    categories = Counter(r["category"] for r in queries if r["split"] == "test")
    assert {"plain", "vocabulary-mismatch", "not-covered", "multi-part", "chit-chat"} <= set(categories), categories
    for kind in ("strips", "support", "rewrite"):  # component labels for the train and dev queries
        rows = load_rows(name, kind)
        assert {r["split"] for r in rows} == {"train", "dev"}, kind
    assert (d.directory / "README.md").read_text().count("licen") >= 1


def test_the_help_centre_has_150_test_queries():
    assert len(load_rows("adversarial", "queries", "test")) >= 150


@functools.lru_cache(maxsize=None)
def _report(name):
    return validate(DOMAINS[name].directory, domain=DOMAINS[name])  # owasp's 32 files take a minute to convert


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_every_label_checks_against_the_documents(name):
    report = _report(name)
    assert report.ok, "\n".join(report.problems[:20])


def test_the_published_documents_domain_keeps_its_answers_through_conversion():
    d = domain("owasp")
    files = [p for p in d.kb_dir.iterdir() if p.suffix in (".pdf", ".docx", ".pptx", ".xlsx")]
    assert len(files) >= 30 and sum(p.suffix == ".pdf" for p in files) >= 20
    queries = load_rows("owasp", "queries")
    assert len(queries) >= 200 and sum(not r["answerable"] for r in queries) >= len(queries) / 4
    assert sum(r.get("where") == "table" for r in queries) >= 30 and sum(r.get("where") == "two-column"
                                                                         for r in queries) >= 20
    report = _report("owasp")
    answerable = sum(r["answerable"] for r in queries)
    # the answer survives extraction: the bar is 95 %; 188 of 190 today
    assert len(report.extraction_misses) <= 0.05 * answerable, report.extraction_misses
    assert len(report.extraction_misses) == 2


def _tiny_domain(tmp_path, queries, strips=()):
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "probes.md").write_text("# Probes\n\nThe kubelet restarts a container when its liveness probe fails. "
                                  "The default period is 10 seconds.\n", encoding="utf-8")
    for kind, rows in (("queries", queries), ("strips", strips), ("support", ()), ("rewrite", ())):
        (tmp_path / f"{kind}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return Domain("tiny", "a test domain", "tiny", ("queries", "strips", "support", "rewrite"), (1, 5), (5, 500),
                  verbatim=True)


QUERY = {"id": "t-q-1", "split": "test", "question": "How often does the kubelet probe my container?",
         "category": "plain", "expected_action": "correct", "relevant_doc_ids": ["probes"],
         "relevant_chunk_ids": ["probes#0"], "answerable": True, "gold_answers": ["10 seconds"],
         "key_facts": ["every 10 seconds by default"], "expert_terms": ["periodseconds"], "needs_retrieval": True}


def test_the_validator_passes_a_correct_row(tmp_path):
    report = validate(tmp_path, domain=_tiny_domain(tmp_path, [QUERY]))
    assert report.ok, report.problems


@pytest.mark.parametrize("change, problem", [
    ({"gold_answers": ["30 seconds"]}, "no relevant chunk states a gold answer"),
    ({"relevant_chunk_ids": ["probes#7"]}, "relevant_chunk_id 'probes#7' is not a chunk of kb/"),
    ({"relevant_doc_ids": ["liveness"], "relevant_chunk_ids": []}, "relevant_doc_id 'liveness' names no file"),
    ({"category": "trivia"}, "category must be one of"),
])
def test_the_validator_names_a_wrong_label(tmp_path, change, problem):
    report = validate(tmp_path, domain=_tiny_domain(tmp_path, [{**QUERY, **change}]))
    assert any(problem in p for p in report.problems), report.problems


def test_the_validator_wants_strips_copied_from_the_documents(tmp_path):
    strip = {"id": "t-s-1", "split": "train", "question": "When is a container restarted?",
             "strips": ["The kubelet restarts a container when its liveness probe fails.",
                        "The default period is 10 seconds.", "The kubelet restarts a pod every minute."],
             "relevant": [1], "source": "tiny:probes"}
    report = validate(tmp_path, domain=_tiny_domain(tmp_path, [QUERY], [strip]))
    assert [p for p in report.problems if "not found in any kb/ document" in p] == [
        "strips.jsonl:1 (t-s-1): text not found in any kb/ document (copy it verbatim): "
        "'The kubelet restarts a pod every minute.'"]


def test_limit_samples_every_category_in_proportion():
    # Bug: --limit 40 took the file's first 40 test rows, only plain and vocabulary-mismatch
    # questions and none unanswerable, so the Kubernetes run measured no abstention.
    rows = load_set("kubernetes", 40, 0, "test")
    assert Counter(r["relation"] for r in rows) == {
        "vocabulary-mismatch": 7, "plain": 6, "not-covered": 6, "silent-irrelevance": 5, "multi-part": 5,
        "stale-vs-current": 4, "ambiguous": 3, "shared-name": 3, "chit-chat": 1}
    assert sum(not r["answerable"] for r in rows) == 11
    assert [r["id"] for r in rows] == [r["id"] for r in load_set("kubernetes", 40, 0, "test")]
    assert [r["id"] for r in rows] != [r["id"] for r in load_set("kubernetes", 40, 1, "test")]
    assert len(load_set("kubernetes", 500, 0, "test")) == 125


def test_an_unknown_domain_is_one_line():
    with pytest.raises(ValueError, match="unknown domain 'nosuch'; expected one of: adversarial, handbook, kubernetes"):
        domain("nosuch")


# The help centre only: Kubernetes' and the handbook's whole indexes (1,144 and 856 chunks) took
# 3.5 minutes to build on a fresh clone, through the same code; their labels are checked against
# their chunks above, and the handbook's documents are indexed by tests/test_adapt.py.
@pytest.mark.parametrize("name", ["adversarial"])
def test_one_query_of_a_domain_runs_through_the_program(name, fake_lm, tmp_path, monkeypatch):
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda model=None, *a, **k: fake_lm)
    out = tmp_path / "run"
    code = evaluate.main(["--set", name, "--split", "test", "--limit", "1", "--modes", "rag,crag",
                          "--compiled", "none", "--groundedness", "off", "--out", str(out)])
    assert code == 0
    first = load_set(name, 1, 0, "test")[0]
    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["mode"], r["id"]) for r in rows] == [("rag", first["id"]), ("crag", first["id"])]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["set"] == name and summary["web"] == "none"
    # the fake reader knows only Acme Rockets: rag and crag's draft say "I don't know.", so crag
    # takes the correction (no web for a labeled domain) and declines; no passage is graded by the LM
    assert rows[0]["answer"] == rows[1]["draft"] == "I don't know."
    assert (rows[1]["action"], rows[1]["fallback"], rows[1]["draft_correct"]) == \
        ("incorrect", "True", str(not first["answerable"]))
    assert fake_lm.calls["GradeRetrieval"] == 0 and fake_lm.calls["RewriteQuery"] == 1


def test_a_measuring_domain_trains_no_judge():
    from optimize.training.sources import labeled_files

    assert domain("owasp").trains is False
    files = labeled_files(())
    assert files and not any("/owasp/" in f.as_posix() for f in files)
    assert any("/kubernetes/" in f.as_posix() for f in files)


def test_the_labeled_pairs_cache_is_keyed_by_the_labels_and_the_code():
    # the stamp hashed paths under program/ that do not exist, so new labels or code reused stale pairs
    from optimize.training.sources import ROOT, SOURCES_CODE, labeled_files
    from program.adaptation.adapt import adapt_code

    names = {f.relative_to(ROOT).as_posix() for f in labeled_files(())}
    assert "eval_sets/kubernetes/queries.jsonl" in names and "eval_sets/handbook/support.jsonl" in names
    assert all((ROOT / p).is_file() for p in SOURCES_CODE)
    adapting = {p.relative_to(ROOT).as_posix() for p in adapt_code()}
    assert {"program/adaptation/adapt.py", "program/adaptation/fit.py", "program/judgments/support.py"} <= adapting
