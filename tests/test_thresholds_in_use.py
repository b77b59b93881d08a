"""The thresholds the evaluator sorts scores with belong to the scorer that made the scores.

The bug: ``compiled/judges.json`` chose the LM to grade the help centre's passages, so
``evaluator_thresholds`` gave it the LM's bands (0.2 / 0.6); but CRAG never asks the LM for a
passage grade, so the trained judge's scores were sorted with the LM's cut-offs instead of that
judge's own thresholds for the help centre (0.1 / 0.1). Query-033's ``tax-forms-1099k.md#6``,
scored 0.1116, was called irrelevant (``reports/adversarial-test-60-verify-repeat/steps.csv``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from eval_sets.domains import DOMAINS, domain
from program.app import resources
from program.app.compiled import evaluator_thresholds, read_manifest
from program.app.configuration import load_compiled
from program.judges import load_judges
from program.judgments import PASSAGE
from program.judges.store import corpus_key
from program.paths import DEFAULT_KB_SOURCE, PROJECT_ROOT
from program.retrieval.index import _fingerprint
from program.stages.evaluator import reason_for

COMPILED = PROJECT_ROOT / "compiled"


class Named:
    """A knowledge base as ``corpus_key`` identifies it: its files' sha256 alone."""

    def __init__(self, source: Path):
        self.source, self.manifest = source, {"files": _fingerprint(source)}


def named_in_compiled() -> dict[str, Named]:
    """Every knowledge base the committed compile names (by key), found among PopQA's and the domains'."""
    judges = load_judges(COMPILED)
    keys = set(judges.thresholds_by_corpus) | set(judges.choices_by_corpus)
    keys |= set(read_manifest(COMPILED).get("lm_thresholds_by_corpus", {}))
    known = {corpus_key(kb): kb for kb in [Named(DEFAULT_KB_SOURCE)] + [Named(d.kb_dir) for d in DOMAINS.values()]}
    assert keys <= set(known), f"compiled/ names knowledge bases no test can find: {sorted(keys - set(known))}"
    return {k: known[k] for k in sorted(keys)}


def test_every_knowledge_base_the_compile_names_gets_its_trained_judges_thresholds():
    manifest, judges = read_manifest(COMPILED), load_judges(COMPILED)
    named = named_in_compiled()
    assert len(named) == 2  # PopQA's and the help centre's
    for kb in named.values():
        expected = judges.thresholds_for(kb)
        used = evaluator_thresholds(manifest, judges.for_knowledge_base(kb), kb)
        assert (used["lower"], used["upper"], used["scorer"]) == (expected["lower"], expected["upper"],
                                                                  "trained passage judge"), kb.source
    help_centre = Named(domain("adversarial").kb_dir)
    judges = judges.for_knowledge_base(help_centre)
    assert judges.choice(PASSAGE).use == "lm"  # the compile preferred the LM there, which CRAG never asks
    assert {k: v for k, v in evaluator_thresholds(manifest, judges, help_centre).items() if k != "scorer"} == \
           {"lower": 0.1, "upper": 0.1}


def test_without_a_trained_judge_the_similarity_gets_the_graders_bands():
    kb = Named(domain("adversarial").kb_dir)
    assert evaluator_thresholds({"thresholds": {"lower": 0.05, "upper": 0.55, "source": "trained passage judge"}},
                                None, kb) == {"lower": 0.2, "upper": 0.6, "scorer": "retrieval similarity"}
    assert evaluator_thresholds({"thresholds": {"lower": 0.3, "upper": 0.7}}, None, kb) == \
           {"lower": 0.3, "upper": 0.7, "scorer": "retrieval similarity"}


@pytest.mark.slow  # builds the help centre's index
def test_the_help_centres_passages_are_sorted_by_the_trained_judges_own_thresholds(tmp_path, fake_lm):
    compiled = tmp_path / "compiled"  # the committed compile, without this machine's adapted judges
    shutil.copytree(COMPILED, compiled, ignore=shutil.ignore_patterns("adapted"))
    kb = resources.knowledge_base(domain("adversarial").kb_dir)
    crag = load_compiled(compiled, knowledge_base=kb, web="none")
    assert (crag.settings.lower, crag.settings.upper) == (0.1, 0.1)
    question = "Do I get some kind of tax document from Paylane for my US business?"  # query-033
    passages = kb.search(question, k=3)
    grades = crag.evaluator(question=question, passages=passages, lower=crag.settings.lower,
                            upper=crag.settings.upper, ask_lm=False)
    assert sum(fake_lm.calls.values()) == 0  # the scores are the trained judge's, no LM grade
    assert all(g.explanation.startswith("trained judge") for g in grades)
    assert [g.reason for g in grades] == [reason_for(g.score, 0.1, 0.1) for g in grades]
    failing = {g.passage_id: g for g in grades}.get("tax-forms-1099k.md#6")
    if failing is not None:  # the failing input, when retrieval still ranks it in the top 3
        assert failing.score >= 0.1 and failing.reason == "relevant"
