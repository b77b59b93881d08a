"""Cheap signals a trained judge reads: no LM call, one embedding at most per text.

Three judgments score text against a question or a claim (docs/judges.md):

* passage relevance (CRAG §4.2's retrieval evaluator): ``passage_features``;
* strip relevance (CRAG §4.4's decompose-then-recompose filter): ``strip_features``;
* claim support (Self-RAG's IsSup; MiniCheck's grounding check): ``support_features``.

Each returns a fixed-length list of floats (names in ``*_NAMES``). Passage and strip judges
also read answer-type cues: pairs of a question word that is not part of the entity's name
("occupation", "born", "refund") and a word of the text ("politician", "city", "days"),
hashed by ``program.judges.model``. A linear model over those pairs learns, from the training
split, which words state the kind of answer a question asks for.
"""

from __future__ import annotations

import math
import re

from program.question import parsed
from program.text import STOPWORDS, content_words, coverage, has_negation, names, numbers, sentences, words

_PRONOUN_START = re.compile(r"^(he|she|it|they|his|her|its|their|this|these)\b", re.I)
STALE_CUES = ("deprecated", "legacy", "archived", "superseded", "outdated", "no longer", "sunset",
              "discontinued", "retired", "old version", "replaced by")
MAX_CUE_WORDS = 120  # text words paired with question words; keeps a long passage's cost bounded

PASSAGE_NAMES = ["cosine", "name_coverage", "name_phrase", "name_early", "no_names", "content_coverage",
                 "log_words", "stale_cues"]
STRIP_NAMES = PASSAGE_NAMES + ["pronoun_start", "passage_name_coverage", "passage_cosine"]
SUPPORT_NAMES = ["coverage_best", "coverage_all", "name_coverage", "names_missing", "numbers_missing",
                 "negation_mismatch", "cosine_best", "cosine_all", "lexical_verdict", "log_claim_words",
                 "answer_coverage_best", "answer_coverage_all"]


def name_phrase(question: str) -> str:
    """The longest run of capitalised words after the first word, lower-cased ("" when none;
    ``program.question.Question.name_phrase``)."""
    return parsed(question).name_phrase


def question_cue_words(question: str) -> list[str]:
    """The question's content words that are not names: what kind of answer it asks for."""
    question = parsed(question)
    return sorted(question.content_words - question.names)


def cue_pairs(question: str, text: str) -> list[str]:
    """``"question word|text word"`` pairs, hashed by the linear judge (answer-type cues)."""
    asked = question_cue_words(question)
    said = list(dict.fromkeys(w for w in words(text) if w not in STOPWORDS and len(w) > 1))[:MAX_CUE_WORDS]
    return [f"{q}|{t}" for q in asked for t in said] + [f"*|{t}" for t in said[:40]]


def _name_signals(question: str, text: str) -> tuple[float, float, float, float]:
    wanted = parsed(question).names
    if not wanted:
        return 0.0, 0.0, 0.0, 1.0
    text_words = words(text)
    present = set(text_words)
    phrase = name_phrase(question)
    early = set(text_words[:25])
    return (len(wanted & present) / len(wanted), float(bool(phrase) and phrase in text.lower()),
            len(wanted & early) / len(wanted), 0.0)


def passage_features(question: str, text: str, cosine: float) -> list[float]:
    """Signals that a passage is about the question's entity and states the asked fact.

    Args:
        question: the question.
        text: the passage text.
        cosine: embedding cosine similarity of question and passage, in [-1, 1].

    Returns:
        ``len(PASSAGE_NAMES)`` floats, in that order.
    """
    name_cov, phrase, early, no_names = _name_signals(question, text)
    lowered = text.lower()
    stale = sum(cue in lowered for cue in STALE_CUES)
    asked = parsed(question).content_words  # coverage(question, text), the question's words parsed once
    covered = len(asked & content_words(text)) / len(asked) if asked else 1.0
    return [cosine, name_cov, phrase, early, no_names, covered,
            math.log1p(len(text.split())), float(stale)]


def strip_features(question: str, strip: str, cosine: float, passage: str, passage_cosine: float) -> list[float]:
    """``passage_features`` of the strip, plus the context it came from.

    A strip that starts with a pronoun ("He was a journalist.") is about whoever its passage is
    about, so the passage's name coverage and cosine are read too. ``len(STRIP_NAMES)`` floats.
    """
    passage_name_cov = _name_signals(question, passage)[0]
    return passage_features(question, strip, cosine) + [
        float(bool(_PRONOUN_START.match(strip.strip()))), passage_name_cov, passage_cosine]


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
