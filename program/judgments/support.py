"""Claim support: Self-RAG's IsSup (§3.1), MiniCheck's check that the evidence states a claim.

One score in [0, 1] per claim: the probability that the evidence states it. The trained judge
reads how much of the claim the best evidence sentence and the whole evidence hold, the names
and numbers missing, a negation that differs, cosines, and the word-overlap verdict
(``support_features``); the prompted candidate is ``CheckClaimSupport``. The slice owns its
two thresholds (``SupportThresholds``: a score is *partially* supported from ``partially``,
*fully* from ``fully``), how they are fit (``fit_thresholds``) and the verdict they give
(``verdict``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from program.judgments.base import GRID, Inputs, Judgment
from program.question import parsed
from program.text import content_words, coverage, has_negation, names, numbers, sentences, words
from signatures import CheckClaimSupport

SUPPORT_NAMES = ["coverage_best", "coverage_all", "name_coverage", "names_missing", "numbers_missing",
                 "negation_mismatch", "cosine_best", "cosine_all", "lexical_verdict", "log_claim_words",
                 "answer_coverage_best", "answer_coverage_all"]


def evidence_sentences(evidence: str) -> list[str]:
    """The evidence split into sentences (and lines), the units a claim is compared with: by the
    support judge's features, the word-overlap verdict (``lexical_support``) and the citations."""
    return sentences(evidence)


def support_features(claim: str, sentences: list[str], cosines: list[float], cosine_all: float,
                     lexical_verdict: float, question: str = "") -> list[float]:
    """Signals that the evidence states the claim (MiniCheck's question, answered cheaply).

    Args:
        claim: the claim, citations removed.
        sentences: the evidence's sentences (``evidence_sentences``), at least one.
        cosines: cosine of the claim with each sentence, same order.
        cosine_all: cosine of the claim with the whole evidence.
        lexical_verdict: ``program.stages.selfcheck.lexical_support`` as 1.0 / 0.5 / 0.0.
        question: the question the claim answers ("" when unknown): the share of the claim's
            answer words (``program.stages.selfcheck.answer_words``) in the best sentence and in
            the whole evidence are features too.

    Returns:
        ``len(SUPPORT_NAMES)`` floats. The "best" sentence is the one with the most of the
        claim's content words (ties: the higher cosine).
    """
    evidence = " ".join(sentences)
    ranked = sorted(zip(sentences, cosines), key=lambda sc: (coverage(claim, sc[0]), sc[1]), reverse=True)
    best, best_cos = ranked[0] if ranked else ("", 0.0)
    claim_names = names(" ".join(claim.split()[1:])) | (names(claim.split()[0]) if claim.split() else set())
    evidence_words = set(words(evidence))
    missing_names = claim_names - evidence_words
    missing_numbers = numbers(claim) - numbers(evidence)
    asserted = content_words(claim) - parsed(question).content_words

    def answer_coverage(text: str) -> float:
        return len(asserted & content_words(text)) / len(asserted) if asserted else 1.0

    return [coverage(claim, best), coverage(claim, evidence),
            1.0 - len(missing_names) / len(claim_names) if claim_names else 1.0,
            float(len(missing_names)), float(len(missing_numbers)),
            float(has_negation(claim) != has_negation(best)), max(cosines, default=0.0) if cosines else best_cos,
            cosine_all, lexical_verdict, math.log1p(len(claim.split())),
            max((answer_coverage(s) for s in sentences), default=0.0), answer_coverage(evidence)]


def _inputs(encode, claim: str, evidence: str, lexical_verdict: float, question: str = "") -> Inputs:
    """One item: the claim against the evidence; ``question``'s own words are not evidence of it."""
    sentences = evidence_sentences(evidence) or [evidence]
    vectors = encode([claim, evidence[:2000]] + sentences)
    cosines = (vectors[2:] @ vectors[0]).tolist()
    return [(support_features(claim, sentences, cosines, float(vectors[1] @ vectors[0]), lexical_verdict, question),
             None)]


@dataclass(frozen=True)
class SupportThresholds:
    """IsSup's cuts on a support score: *fully* from ``fully``, *partially* from ``partially``
    (``partially`` <= ``fully``), else *no*. Saved in ``judges.json``'s ``thresholds``."""

    partially: float = 0.35
    fully: float = 0.5

    @classmethod
    def of(cls, judges) -> "SupportThresholds":
        """The thresholds fit for ``judges`` (a ``JudgeSet``), each defaulting to its own."""
        saved, default = judges.thresholds, cls()
        return cls(saved.get("support_partially", default.partially), saved.get("support_fully", default.fully))

    def saved(self) -> dict[str, float]:
        """As ``JudgeSet.thresholds`` stores them."""
        return {"support_partially": self.partially, "support_fully": self.fully}

    def verdict(self, score: float) -> str:
        """Self-RAG's verdict for a support score: ``fully``, ``partially`` or ``no``."""
        if score >= self.fully:
            return "fully"
        return "partially" if score >= self.partially else "no"

    def values(self, scores) -> np.ndarray:
        """The verdicts of ``scores`` as 1.0 / 0.5 / 0.0 (the rows' targets)."""
        scores = np.asarray(scores)
        return np.where(scores >= self.fully, 1.0, np.where(scores >= self.partially, 0.5, 0.0))

    def accuracy(self, targets, scores) -> float:
        """Three-way verdict accuracy of ``scores`` against ``targets`` (1 / 0.5 / 0), rounded to 4."""
        return round(float((self.values(scores) == np.asarray(targets)).mean()), 4)


def verdict(judges, score: float) -> str:
    """Self-RAG's verdict for a trained support score, by ``judges``' calibrated thresholds."""
    return SupportThresholds.of(judges).verdict(score)


def kept(judges, scores) -> np.ndarray:
    """Booleans: which support scores keep their claim (*partially* or better)."""
    return np.asarray(scores) >= SupportThresholds.of(judges).partially


def accuracy(judges, targets, scores) -> float:
    """``judges``' three-way verdict accuracy on ``scores`` against ``targets`` (1 / 0.5 / 0)."""
    return SupportThresholds.of(judges).accuracy(targets, scores)


def _grid() -> list[SupportThresholds]:
    return [SupportThresholds(lo, hi) for lo, hi in itertools.product(GRID, GRID) if lo <= hi]


def fit_thresholds(targets, scores) -> tuple[SupportThresholds, float]:
    """``(thresholds, accuracy)`` for the best three-way verdict accuracy on out-of-fold
    ``scores`` of rows labeled ``targets`` (1 / 0.5 / 0)."""
    best, best_acc = SupportThresholds(), -1.0
    for t in _grid():
        acc = float((t.values(scores) == np.asarray(targets)).mean())
        if acc > best_acc:
            best, best_acc = t, acc
    return best, best_acc


def fit_thresholds_sets(targets, scores, popqa_labels, popqa_scores) -> tuple[SupportThresholds, float]:
    """``(thresholds, mean accuracy)`` for the best mean of two figures: the labeled rows'
    three-way verdict accuracy (``targets`` 1 / 0.5 / 0) and the PopQA claims' kept accuracy
    (``popqa_labels`` 0/1; a claim is kept at ``partially`` or above). Calibrating on the
    labeled rows alone set ``partially`` where it passed wrong PopQA answers."""
    popqa_labels, popqa_scores = np.asarray(popqa_labels, bool), np.asarray(popqa_scores)
    best, best_mean = SupportThresholds(), -1.0
    for t in _grid():
        mean = (t.accuracy(targets, scores) + float(((popqa_scores >= t.partially) == popqa_labels).mean())) / 2
        if mean > best_mean + 1e-9:
            best, best_mean = t, round(mean, 4)
    return best, best_mean


def fit_kept(popqa_labels, popqa_scores) -> SupportThresholds:
    """PopQA's claims alone are kept or not: one threshold (``partially``, the best kept
    accuracy, ties the lower), and ``fully`` no lower than it."""
    labels, scores = np.asarray(popqa_labels, bool), np.asarray(popqa_scores)
    lo = max(GRID, key=lambda t: (float(((scores >= t) == labels).mean()), -t))
    return SupportThresholds(lo, max(lo, 0.5))


SUPPORT = Judgment("support", CheckClaimSupport, lambda crag: crag.checker.support, "support", tuple(SUPPORT_NAMES),
                   _inputs, thresholds=SupportThresholds)
JUDGMENT = SUPPORT
