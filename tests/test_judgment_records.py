"""One slice per judgment, one scoring entry, one rule for claim support."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from program.judges import JudgeChoice
from program.judgments import JUDGMENTS, PASSAGE, STRIP, SUPPORT, TRAINED, USEFULNESS, as_judgment, predictor_of
from program.stages.attribution import support as attribution_support
from program.stages.crag import CRAG
from program.stages.selfcheck import ClaimChecker, decide_support, lexical_support
from program.types import Passage, Strip
from tests.conftest import FOUNDING, ListKnowledgeBase
from tests.test_judges import Q, judge_on, toy_judges

ROOT = Path(__file__).resolve().parents[1]
NAMES = "|".join(JUDGMENTS)
# where a judgment's name would be typed: asking who judges it, reading its judge, fitting one
TYPED = [re.compile(p) for p in (
    rf"who_judges\([^)]*[\"']({NAMES})[\"']", rf"\.choice\([\"']({NAMES})[\"']", rf"judges\[[\"']({NAMES})[\"']\]",
    rf"\.get\([\"']({NAMES})[\"']\)", r"LinearJudge\.fit\([\"']", r"JudgeSet\(\{[\"']", rf"[\"']({NAMES})[\"'] in ")]

# a claim one evidence sentence half states (word overlap: "partially"), and a support judge
# that scores every claim 0.0067 ("no")
CLAIM = "Jane Roe founded Acme Rockets in 1999 with venture capital funding."
EVIDENCE = "Acme Rockets was founded by Jane Roe in 1999."


def doubting_judges():
    from program.judgments.support import SUPPORT_NAMES

    judges = toy_judges()
    judges.judges[SUPPORT.name] = judge_on(SUPPORT.name, SUPPORT_NAMES, "coverage_best", 0.0, -5.0)
    return judges


def test_no_judgment_name_is_typed_outside_its_slices():
    found = []
    for package in ("program", "optimize", "experiments"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.parent.name == "judgments":  # the slices and their registries
                continue
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                found += [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for p in TYPED if p.search(line)]
    assert found == []


def test_the_name_tuples_are_derived_from_the_records():
    assert list(JUDGMENTS) == ["passage", "rewrite", "standalone", "strip", "support", "usefulness"]
    assert [j.name for j in TRAINED] == ["passage", "strip", "support"]
    # the judges' report lists the judgments a trained judge can make, not the LM's rewrites
    assert list(toy_judges().report()["judgments"]) == ["passage", "strip", "support", "usefulness"]
    assert as_judgment("strip") is STRIP and as_judgment(SUPPORT) is SUPPORT
    with pytest.raises(KeyError):
        as_judgment("relevance")


def test_each_records_predictor_is_in_the_program_with_its_signature():
    program = CRAG(ListKnowledgeBase([FOUNDING]))
    predictors = [p for _, p in program.named_predictors()]
    for judgment in JUDGMENTS.values():
        predictor = predictor_of(program, judgment)
        assert any(predictor is p for p in predictors)
        assert list(predictor.signature.input_fields) == list(judgment.signature.input_fields)


def test_one_entry_scores_every_judgment():
    judges = toy_judges()
    named = Passage("kb#0", FOUNDING, score=0.5)  # "Acme Rockets" in the text: name_phrase 1
    other = Passage("kb#1", "The Danube flows through ten countries.", score=0.5)
    assert judges.score(PASSAGE, question=Q, passages=[named, other]) == pytest.approx(
        [1 / (1 + np.exp(-3.0)), 1 / (1 + np.exp(3.0))], abs=1e-4)
    # usefulness reads the passage judge: the same score for the same text
    assert judges.score(USEFULNESS, question=Q, passages=[named]) == judges.score(PASSAGE, question=Q, passages=[named])
    strips = [Strip("kb#0", 0, "Acme Rockets was founded by Jane Roe."), Strip("kb#1", 0, "The Danube is long.")]
    strip_scores = judges.score(STRIP, question=Q, strips=strips, passages=[named, other])
    assert strip_scores[0] > 0.5 > strip_scores[1]
    [support] = judges.score(SUPPORT, claim="Jane Roe founded it.", evidence=EVIDENCE, lexical_verdict=1.0, question=Q)
    assert 0.0 < support < 1.0
    assert judges.score(PASSAGE, question=Q, passages=[]) == []


def test_the_self_check_and_the_citations_decide_support_by_one_rule(fake_lm):
    # the failing input: the self-check said "no" (the judge alone) where the citations said
    # "partially" (the better of the judge and word overlap) for the same claim and strip
    judges = doubting_judges()
    assert lexical_support(CLAIM, EVIDENCE, Q) == "partially"
    decided = decide_support(CLAIM, EVIDENCE, Q, judges)
    assert decided.verdict == "partially" and decided.lexical == "partially"
    assert decided.score == pytest.approx(1 / (1 + np.exp(5.0)), abs=1e-4)
    [claim] = ClaimChecker(judges=judges)(question=Q, answer=CLAIM, strips=[Strip("kb#0", 0, EVIDENCE)])
    verdict, _ = attribution_support(CLAIM, Strip("kb#0", 0, EVIDENCE), Q, judges)
    assert claim.support == verdict == "partially"
    assert claim.score == decided.score
    assert fake_lm.calls["CheckClaimSupport"] == 0


def test_the_lm_is_asked_only_where_the_choice_says_and_never_by_the_citations():
    judges, asked = doubting_judges(), []

    def quote(claim, evidence):
        asked.append(claim)
        return EVIDENCE

    judges.choices[SUPPORT.name] = JudgeChoice("lm")
    assert decide_support(CLAIM, EVIDENCE, Q, judges, quote=quote) == ("partially", None, "partially")
    assert len(asked) == 1
    assert decide_support(CLAIM, EVIDENCE, Q, judges).score is not None  # no quote: the judge decides
    assert len(asked) == 1
    # a role the strip does not state is unsupported before anything is asked
    assert decide_support("The producer of The Hunt was Craig Zobel.", "The Hunt is a film directed by Craig Zobel.",
                          "Who was the producer of The Hunt?", judges, quote=quote).verdict == "no"
    assert len(asked) == 1


def test_the_compile_measures_the_support_candidates_by_the_programs_rule():
    import dspy

    from optimize.judgments.support import candidates

    row = dspy.Example(claim=CLAIM, evidence=EVIDENCE, question=Q, support="partially")
    figures = candidates(doubting_judges(), [(row, dspy.Prediction(quote="NONE"), None)])
    assert figures == {"trained": 1.0, "cascade": 1.0, "lm": 1.0}


def test_a_judgment_with_its_own_rows_is_trained_on_them_alone():
    # what a new judgment's training slice may fit with: its inputs, a Signature, a row reader;
    # here a toy one whose feature is whether the passage holds the question's numbers
    from optimize.judgments import fit_from_rows
    from program.adaptation.fit import trained_set
    from program.judgments import Judgment, passage_cosines
    from program.text import numbers
    from signatures import GradeRetrieval
    from tests.test_judges import WordEmbedder

    def inputs(encode, question, passages):
        return [([float(numbers(question) <= numbers(p.text)), c], None)
                for p, c in zip(passages, passage_cosines(encode, question, passages))]

    def example(row):
        return {"question": row["question"],
                "passages": [Passage(row["id"], row["passage"], source="row")]}, row["holds"]

    toy = Judgment("toy", GradeRetrieval, None, "toy", ("numbers_held", "cosine"), inputs)
    rows = [{"id": f"r{i}", "question": f"Can I send {a} in one transfer?",
             "passage": f"You can send up to {b} at once.",
             "holds": a == b} for i, (a, b) in enumerate([(10, 10), (20, 10), (30, 30), (40, 30), (50, 50), (60, 50),
                                                          (70, 70), (80, 70), (90, 90), (15, 90)])]
    embedder = WordEmbedder()
    judge, pairs, keep = fit_from_rows(toy, rows, example, embedder.encode)
    assert len(pairs) == len(rows)
    judges = trained_set({toy: judge}, thresholds={"toy_keep": keep}, embedder=embedder)
    held, lost = judges.score(toy, question="Can I send 25 in one transfer?",
                              passages=[Passage("a", "You can send up to 25 at once."),
                                        Passage("b", "Up to 12 at once.")])
    assert held > keep > lost
    assert judges.choice(toy).use == "trained"


def test_the_compiles_popqa_rows_ask_each_judgments_own_predictor_with_its_signatures_inputs(fake_lm):
    # the compile's judge choice reads each record's rows, predictor and Signature (PopQA dev)
    from optimize.judge_choice import popqa_lm_rows
    from program.app import resources

    kb = resources.knowledge_base()
    rows = popqa_lm_rows(CRAG(kb), kb, n=4)
    assert list(rows) == [j.rows for j in TRAINED]
    for judgment in TRAINED:
        assert len(rows[judgment.rows]) == 4
        assert all(set(e.inputs().keys()) == set(judgment.signature.input_fields) for e, _, _ in rows[judgment.rows])
    # a claim word overlap already calls "fully" is decided without the LM, as in the program
    asked = sum(p is not None for _, p, _ in rows[SUPPORT.rows])
    assert fake_lm.calls["GradeRetrieval"] == 4 and fake_lm.calls["StripRelevance"] == 4
    assert fake_lm.calls["CheckClaimSupport"] == asked


def test_every_trained_judgment_has_one_training_slice_and_one_compiled_predictor():
    # the compile builds the judgments' predictors and fits and measures their judges from the slices
    from optimize.compile import SPECS
    from optimize.judgments import JUDGES, TRAINING

    assert [t.judgment for t in JUDGES] == list(TRAINED)
    assert all(t.measure and t.fit and t.dev_figures for t in JUDGES)
    assert {t.judgment.name for t in TRAINING} == {"passage", "rewrite", "standalone", "strip", "support"}
    specs = {s.kind: s for s in SPECS}
    for t in TRAINING:
        spec = specs[t.judgment.rows]
        assert (spec.signature, spec.locate, spec.metric, spec.figures) == (t.judgment.signature, t.judgment.locate,
                                                                             t.metric, t.figures)
