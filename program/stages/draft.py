"""The reader's draft as evidence: what one answer's own checks say about it, and its confidence.

Plain RAG's one generation reads the top passages better than any judge we have; CRAG keeps
that call and checks its output instead of gating its input. A draft's checks (each a number
in [0, 1], no LM call beyond the generation that wrote it):

- ``support``: the answer's own words (those the question lacks; numbers in digits) stand in
  the passages it cites (Self-RAG's IsSup, read by word overlap; MiniCheck checks the same words);
- ``premise``: the question's names, numbers and terms stand in the cited passages: a draft
  that answers "the default for X" from a passage about Y is a look-alike answered wrongly;
- ``token_probability``: how sure the reader was of its words (geometric mean of their token
  probabilities, ``program.lm.token_scores.field_text_probability``; 0.5 when the LM gives none);
- ``passage_score``: the retrieval evaluator's score of the best cited passage (CRAG §4.2);
- ``numbers_grounded``: the answer's own numbers (those the question lacks) stand in its
  passages: a small reader invents a "$15" or "1.5 weeks" the documents never wrote;
- ``abstained``: the draft says the passages do not answer;
- ``unmentioned``: the question's names that neither the knowledge base nor the draft's
  passages ever write (``asked_names``): the documents cannot say what they never name, so
  such a draft never holds up, however confident (not a feature: a gate). The same holds for
  the time a question is conditioned on (``asked_times``): a year the documents never write,
  or a span into the future ("40 years from now") no passage writes, is a premise they do not
  cover: what they say of today is not an answer about then.

``confidence`` combines them by logistic regression (``ConfidenceModel``); an abstaining draft
has confidence 0. Selective question answering scores an answer's correctness the same way
(Kamath et al. 2020: a calibrator over the answer's probability and its features).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from program.lm.continuation import Reading
from program.question import parsed
from program.retrieval.mentions import mentioned_in, word_set
from program.stages.generation import cited_numbers
from program.stages.selfcheck import (VERDICT_VALUE, is_abstention, lexical_support, strip_citations,
                                      without_asked_entity)
from program.text import content_words, coverage, numbers, spelled_as_digits, words
from program.types import Strip

# A term a reader copies from the documents: camelCase, snake_case, dotted, or with digits.
FEATURES = ("support", "sentence_support", "premise", "question_coverage", "token_probability", "passage_score",
            "cited", "numbers_grounded")


@dataclass
class DraftEvidence:
    """The checks of one answer against the passages it was written from, each in [0, 1].

    Attributes:
        support: share of the answer's own words (content words the question lacks) found in
            the cited passages (when it cites none: the passage holding most of those words);
            0.0 for an abstention.
        sentence_support: Self-RAG's IsSup of the answer against the best single sentence of
            those passages, by word overlap (``lexical_support``: fully 1.0, partially 0.5, no 0.0).
        premise: share of the question's names, numbers and terms found in the cited passages
            (1.0 when the question has none).
        question_coverage: share of the question's content words in the cited passages.
        token_probability: the reader's probability of its answer's words; 0.5 when unknown.
        passage_score: the evaluator's best score among the cited passages (0.5 when ungraded).
        cited: 1.0 when the answer itself cites a passage with ``[n]``, else 0.0.
        numbers_grounded: share of the answer's own numbers (not in the question) written in
            any of its passages, digits or words (1.0 when it has none).
        abstained: the answer says the passages do not answer the question.
        unmentioned: the question's names (``asked_names``) the caller found nowhere in the
            knowledge base that its passages do not write either, sorted; ``()`` when none.
    """

    support: float = 0.0
    sentence_support: float = 0.0
    premise: float = 0.0
    question_coverage: float = 0.0
    token_probability: float = 0.5
    passage_score: float = 0.5
    cited: float = 0.0
    numbers_grounded: float = 1.0
    abstained: bool = False
    unmentioned: tuple[str, ...] = ()

    def vector(self) -> list[float]:
        """The features in ``FEATURES`` order (the confidence model's input)."""
        return [float(getattr(self, name)) for name in FEATURES]

    def summary(self) -> str:
        """One line for the trace: ``support=0.8 premise=1.0 ...``."""
        return " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(self).items())


def written(terms, texts: list[str]) -> set[str]:
    """The ``terms`` (names, years, spans of ``asked_times``) that ``texts`` write: a word in either
    number (``program.retrieval.mentions``), a span as its count and unit ("40 years")."""
    words_there = word_set(texts)
    joined = " ".join(" ".join(texts).lower().split())
    return {t for t in terms if (" " not in t and mentioned_in(words_there, [t]))
            or (" " in t and t.removesuffix(" from now") in joined)}


def check_draft(question: str, answer: str, strips: list[Strip], scores: dict[str, float],
                token_probability: float | None = None,
                unknown: set[str] | frozenset[str] = frozenset()) -> DraftEvidence:
    """The draft's checks (``DraftEvidence``) for ``answer`` written from numbered ``strips``.

    Args:
        question: the question asked.
        answer: the generated answer with its ``[n]`` markers.
        strips: the context the answer was written from, numbered from 1.
        scores: the evaluator's score per passage id (missing or negative: ungraded).
        token_probability: the reader's answer probability, or None when the LM gave none.
        unknown: the question's names the knowledge base never mentions
            (``asked_names`` less ``KnowledgeBase.mentions``); those the passages do not write
            either (web pages may) are the draft's ``unmentioned``.
    """
    if is_abstention(answer) or not strips:
        return DraftEvidence(abstained=True, token_probability=_or_half(token_probability))
    cited = cited_numbers(answer, len(strips))
    question = parsed(question)
    said = own_words(strip_citations(answer)) - question.own_words
    # An answer without markers cites, in effect, the passage holding most of its own words
    # (as attribution would cite it): its checks read that passage, not all of them.
    evidence = [strips[n - 1] for n in cited] or [max(strips, key=lambda s: len(said & own_words(s.text)))]
    text = " \n".join(s.text for s in evidence)
    in_evidence = own_words(text)
    support = len(said & in_evidence) / len(said) if said else 0.5
    premise = question.premise
    evidence_words = set(words(text))
    graded = [scores[s.source_id] for s in evidence if scores.get(s.source_id, -1.0) >= 0]
    return DraftEvidence(
        support=round(support, 4),
        sentence_support=VERDICT_VALUE[lexical_support(without_asked_entity(strip_citations(answer), question),
                                                       text, question)],
        premise=round(len(premise & evidence_words) / len(premise), 4) if premise else 1.0,
        question_coverage=round(coverage(question, text), 4),
        token_probability=_or_half(token_probability),
        passage_score=round(max(graded), 4) if graded else 0.5,
        cited=1.0 if cited else 0.0,
        numbers_grounded=numbers_grounded(question, strip_citations(answer), strips),
        # a strip's title counts: a web page's sentences rarely repeat the name the page is about
        unmentioned=tuple(sorted(set(unknown) - written(unknown, [f"{s.title or ''} {s.text}" for s in strips]))),
    )


def own_words(text: str) -> set[str]:
    """``text``'s content words with its numbers in digits, a one-digit number too: "There are 5
    bells" and "contains five bells" share "5" (the 1.5B model writes a number its own way when it
    copies it, and a one-digit number is shorter than ``content_words`` keeps)."""
    digits = spelled_as_digits(text)
    return content_words(digits) | numbers(digits)


def numbers_grounded(question: str, answer: str, strips: list[Strip]) -> float:
    """Share of ``answer``'s numbers that the question lacks and some strip writes (in digits
    or words, ``spelled_as_digits``), in [0, 1]; 1.0 when the answer has no number of its own.

    ``("How much do cards cost?", "$15", [Strip(text="Order cards from the print shop.")])`` -> 0.0
    """
    own = numbers(spelled_as_digits(answer)) - parsed(question).digits
    if not own:
        return 1.0
    written = numbers(spelled_as_digits(" \n".join(s.text for s in strips)))
    return round(len(own & written) / len(own), 4)


def _or_half(p: float | None) -> float:
    return 0.5 if p is None else float(p)


# Set by hand before any fit: each check pulls the same way, the answer's own words and the
# premise most (a right answer copies its words from a passage that names what was asked).
DEFAULT_WEIGHTS = {"support": 2.0, "sentence_support": 0.0, "premise": 2.0, "question_coverage": 1.0,
                   "token_probability": 2.0,
                   "passage_score": 1.0, "cited": 0.5, "numbers_grounded": 0.0}
DEFAULT_BIAS = -4.5


@dataclass
class ConfidenceModel:
    """A draft's probability of being right: ``sigmoid(bias + sum(weights[f] * evidence.f))``.

    Attributes:
        weights: one weight per name of ``FEATURES``; missing ones count 0.
        bias: the intercept.
        source: where the weights came from (``"default"``, or the rows they were fit on).

    ``score(evidence)`` is in [0, 1]; an abstaining draft, or one about a name its sources never
    write (``unmentioned``), scores 0.0.
    """

    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    bias: float = DEFAULT_BIAS
    source: str = "default"

    def score(self, evidence: DraftEvidence) -> float:
        if evidence.abstained or evidence.unmentioned:  # no answer, or one about what its sources never name
            return 0.0
        z = self.bias + sum(self.weights.get(name, 0.0) * value for name, value in zip(FEATURES, evidence.vector()))
        return round(1.0 / (1.0 + math.exp(-z)), 4)

    @classmethod
    def from_dict(cls, data: dict | None) -> "ConfidenceModel":
        """The model saved by ``to_dict`` (the default one for None or an empty dict).

        Raises:
            ValueError: a weight or the bias that is not a number.
        """
        if not data:
            return cls()
        try:
            weights = {str(k): float(v) for k, v in dict(data.get("weights", {})).items()}
            return cls(weights=weights, bias=float(data.get("bias", DEFAULT_BIAS)), source=str(data.get("source", "")))
        except (TypeError, ValueError) as exc:
            raise ValueError(f"confidence model: weights and bias must be numbers ({exc})") from None

    def to_dict(self) -> dict:
        return {"weights": self.weights, "bias": self.bias, "source": self.source}


@dataclass
class Draft:
    """One written answer with the context it was written from and its checks.

    Attributes:
        answer: the generated text with its ``[n]`` markers ("" when nothing was written).
        strips: the numbered context (``[1]`` is ``strips[0]``).
        evidence: its checks (``check_draft``).
        confidence: its probability of being right (``ConfidenceModel.score``), in [0, 1].
        reading: the reader's call as the LM saw it (``program.lm.continuation.Reading``), which
            the claim check continues so that the prompt cache serves the strips; None when
            it was not recorded.
    """

    answer: str
    strips: list[Strip]
    evidence: DraftEvidence
    confidence: float
    reading: Reading | None = None

    @property
    def abstained(self) -> bool:
        return self.evidence.abstained

    def cited_strips(self) -> list[Strip]:
        """The strips the answer cites, or all of them when it cites none (nothing when it abstained)."""
        if self.abstained:
            return []
        cited = cited_numbers(self.answer, len(self.strips))
        return [self.strips[n - 1] for n in cited] or list(self.strips)
