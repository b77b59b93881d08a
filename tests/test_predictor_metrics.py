"""The per-predictor metrics that compilation optimises and reports."""

from __future__ import annotations

import dspy
import pytest

from optimize import predictor_metrics as pm
from program.types import Passage


def strip(question, text, relevant):
    return dspy.Example(question=question, strip=text, relevant=relevant).with_inputs("question", "strip")


def test_strip_f1_counts_kept_against_relevant():
    rows = [
        (strip("q", "Jane Roe founded it.", True), dspy.Prediction(answer_span="Jane Roe"), 1.0),   # tp
        (strip("q", "It is in Ohio.", False), dspy.Prediction(answer_span="Ohio"), 0.0),            # fp
        (strip("q", "Built in 1999.", True), dspy.Prediction(answer_span="NONE"), 0.0),             # fn
        (strip("q", "The sky is blue.", False), dspy.Prediction(answer_span="NONE"), 1.0),          # tn
    ]
    assert pm.strip_f1(rows) == {"precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert [pm.strip_accuracy(e, p) for e, p, _ in rows] == [1.0, 0.0, 0.0, 1.0]
    figures = pm.strip_figures(rows)
    assert figures["primary"] == 0.5 and figures["accuracy"] == 0.5


def test_strip_accuracy_rejects_words_the_strip_does_not_hold():
    example = strip("q", "Jane Roe founded it.", True)
    assert pm.strip_accuracy(example, dspy.Prediction(answer_span="John Doe")) == 0.0
    assert pm.strip_accuracy(example, dspy.Prediction(answer_span=None)) == 0.0


class OneDocKB:
    def search(self, query, k=3):
        doc = "decline-codes.md" if "decline" in query else "fees.md"
        return [Passage(id=f"{doc}#0", text="...")]


def test_rewrite_metric_is_half_terms_half_retrieval():
    example = dspy.Example(question="my card payment failed", expert_terms=["decline code", "do_not_honor"],
                           relevant_doc_ids=["decline-codes"]).with_inputs("question")
    metric = pm.rewrite_metric_for(OneDocKB())
    assert metric(example, dspy.Prediction(query="decline code meaning")) == pytest.approx(0.5 * 0.5 + 0.5 * 1.0)
    assert metric(example, dspy.Prediction(query="payment failed")) == 0.0
    assert pm.doc_of("kb/decline-codes.md#3") == "decline-codes"


class TermsKB:
    """Candidate terms: the question's words reversed, recorded per call."""

    def __init__(self):
        self.asked = []

    def candidate_terms(self, question, n=12):
        self.asked.append((question, n))
        return question.split()[::-1][:n]


def test_with_candidate_terms_adds_the_knowledge_base_terms_as_an_input():
    examples = [dspy.Example(id="r1", question="my card payment failed", expert_terms=["decline code"],
                             relevant_doc_ids=["decline-codes"]).with_inputs("question")]
    kb = TermsKB()
    (out,) = pm.with_candidate_terms(examples, kb, n=2)
    assert kb.asked == [("my card payment failed", 2)]
    assert out.candidate_terms == ["failed", "payment"]
    assert set(out.inputs().keys()) == {"question", "candidate_terms"}
    assert set(out.labels().keys()) == {"id", "expert_terms", "relevant_doc_ids"}
    assert "candidate_terms" not in examples[0]  # the given examples are unchanged


def test_compile_rewrite_examples_carry_the_adversarial_candidate_terms(monkeypatch):
    from eval_sets.adversarial import load_rows
    from optimize import compile as compile_mod

    kb = TermsKB()
    monkeypatch.setattr(pm, "adversarial_knowledge_base", lambda: kb)
    dev = compile_mod.labeled_examples("rewrite", "dev")
    assert [e.question for e in dev] == [r["question"] for r in load_rows("rewrite", "dev")]
    assert all(e.candidate_terms == e.question.split()[::-1][:12] for e in dev)
    assert all(set(e.inputs().keys()) == {"question", "candidate_terms"} for e in dev)
    assert len(compile_mod.labeled_examples("rewrite", "train", 5)) == 5


def test_the_adversarial_knowledge_base_offers_its_own_terms():
    # the real Paylane knowledge base (built or reused under .cache/indexes)
    terms = pm.adversarial_knowledge_base().candidate_terms("Is two-factor authentication optional for my team?")
    assert len(terms) == 12 and "two-factor authentication" in [t.casefold() for t in terms]


def test_answer_metric_rewards_right_grounded_answers_that_cite_the_right_strip():
    example = dspy.Example(question="Who founded Acme?",
                           context=["[1] Acme sells anvils.", "[2] Acme was founded by Jane Roe in 1999."],
                           gold_answers=["Jane Roe"]).with_inputs("question", "context")
    cited = dspy.Prediction(answer="Acme was founded by Jane Roe [2].")
    uncited = dspy.Prediction(answer="Acme was founded by Jane Roe.")
    miscited = dspy.Prediction(answer="Acme was founded by Jane Roe [1].")
    padded = dspy.Prediction(answer="Jane Roe, a famous Martian astronaut and painter, founded it [2].")
    assert pm.answer_citation_metric(example, cited) == 1.0
    assert pm.answer_citation_metric(example, uncited) == 0.75  # right and grounded, cites nothing
    assert pm.answer_citation_metric(example, miscited) == 0.75  # strip 1 does not say it
    assert pm.written_citations(example, miscited) == (0.0, 0.0)
    assert pm.answer_citation_metric(example, padded) < 0.75
    assert pm.answer_citation_metric(example, dspy.Prediction(answer="Elon Musk [2].")) == 0.0


def test_a_right_abstention_needs_no_citation():
    example = dspy.Example(question="Who founded Acme?", context=["[1] Acme sells anvils."],
                           gold_answers=["don't know"]).with_inputs("question", "context")
    assert pm.answer_citation_metric(example, dspy.Prediction(answer="I don't know.")) == 1.0
    assert pm.written_citations(example, dspy.Prediction(answer="I don't know.")) == (None, None)


def test_labeled_answer_demos_cite_their_strip_and_lose_the_sources_footnotes():
    # answer-001 of the adversarial set: Wikipedia's "[1] [2]" footnotes in the labeled context
    from optimize import compile as compile_mod
    train = compile_mod.labeled_examples("answers", "train")
    first = next(e for e in train if e.id == "answer-001")
    assert first.context[1].startswith("[2] He was born in Krisitania") and first.context[1].endswith("(1889–1980).")
    assert first.context[0].endswith("University of Bergen.")
    assert first.answer == "Olaf Holtedahl [2]."
    assert pm.answer_citation_metric(first, dspy.Prediction(answer=first.answer)) == 1.0
    unanswerable = next(e for e in train if e.case == "not-in-context")
    assert unanswerable.answer == "I don't know."


def support(claim, evidence, label):
    return dspy.Example(claim=claim, evidence=evidence, support=label).with_inputs("claim", "evidence")


def test_support_figures_separate_the_quote_from_the_word_overlap_path():
    evidence = "Acme Rockets was founded by Jane Roe in 1999. It is based in Ohio."
    rows = [
        # word overlap already finds it; the model wrongly wrote NONE: the program still says fully
        (support("Acme Rockets was founded by Jane Roe.", evidence, "fully"), dspy.Prediction(quote="NONE"), 0.0),
        # a paraphrase no sentence states word for word: no quote can earn "fully" under judge_support
        (support("Jane Roe started the rocket firm Acme.", evidence, "fully"),
         dspy.Prediction(quote="Acme Rockets was founded by Jane Roe in 1999."), 0.0),
        (support("Acme Rockets is based in Texas.", evidence, "no"), dspy.Prediction(quote="NONE"), 1.0),
    ]
    figures = pm.support_figures(rows)
    assert figures["accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    assert figures["program_accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert figures["word_overlap_accuracy"] == pytest.approx(2 / 3, abs=1e-4)
    assert figures["quote_ceiling"] == pytest.approx(2 / 3, abs=1e-4)
