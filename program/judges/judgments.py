"""The judgments, one record each: what the program asks of a passage, a strip, a claim or an answer.

A ``Judgment`` holds everything that decides it: the prompted Signature and where its predictor
sits in the CRAG module, the features a trained judge reads (``inputs``), the kind of labeled rows
it learns from and is measured on, and the candidates the compile weighs (docs/judges.md):

* ``PASSAGE``: CRAG §4.2's retrieval evaluator, the relevance of each retrieved passage;
* ``STRIP``: CRAG §4.4's decompose-then-recompose filter, the relevance of each knowledge strip;
* ``SUPPORT``: Self-RAG's IsSup (§3.1), MiniCheck's check that the evidence states a claim;
* ``USEFULNESS``: Self-RAG's IsUse, read by the passage judge (``reads``), with no judge of its own.

Every other module names a judgment by its record (``who_judges(judges, STRIP)``,
``judges.score(PASSAGE, ...)``); the name strings live here only. Adding a judgment is a features
function (``program.judges.features``), a Signature (``signatures/``), a record in ``JUDGMENTS``
with its ``example``, and its labeled rows (``eval_sets/adversarial``): ``python -m
optimize.training.train`` then trains it, and ``judges.score(RECORD, ...)`` scores it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

from program.judges.features import (PASSAGE_NAMES, STRIP_NAMES, SUPPORT_NAMES, cue_pairs, evidence_sentences,
                                     passage_features, strip_features, support_features)
from signatures import CheckClaimSupport, GradeRetrieval, JudgeUsefulness, StripRelevance

Inputs = list[tuple[list[float], list[str] | None]]  # per scored item: dense features, cue pairs (None: none)
CANDIDATES = ("trained", "cascade", "lm")  # cheapest first: a tie on dev goes to the first


@dataclass(frozen=True)
class Threshold:
    """A cut on a judgment's scores, owned by its ``Judgment`` record: ``key`` names it in
    ``judges.json`` (where the compile and ``index`` save what they fit), ``default`` is used
    when none was fit. Read it with ``JudgeSet.threshold``; no module names the key itself."""

    key: str
    default: float


STRIP_KEEP = Threshold("strip_keep", 0.5)  # a strip at or above it is kept (CRAG §4.4)
SUPPORT_PARTIALLY = Threshold("support_partially", 0.35)  # IsSup: partially supported from here
SUPPORT_FULLY = Threshold("support_fully", 0.5)  # IsSup: fully supported from here


@dataclass(frozen=True)
class Judgment:
    """One judgment the program makes, and everything that decides it.

    Attributes:
        name: the key in ``judges.json``, the compile's report and the trace.
        signature: the prompted ``dspy.Signature`` (the ``lm`` candidate).
        predictor: the Signature's predictor in the CRAG module (``"evaluator.grade"``), which
            the compile optimizes; "" when the judgment has none of its own.
        rows: the kind of labeled rows it learns from and is measured on (the adversarial set's
            ``grading`` / ``strips`` / ``support`` and the compile's predictor name); "" for none.
        feature_names: the dense features its trained judge reads, in order.
        inputs: ``inputs(encode, **items) -> Inputs``: the trained judge's inputs for each item
            scored; ``encode(list[str]) -> np.ndarray`` embeds texts (``JudgeSet._encode``).
        candidates: who may decide it: ``trained``, ``cascade``, ``lm`` (``JudgeChoice.use``).
        reads: the judgment whose trained judge scores it (usefulness reads the passage judge),
            or None when it has its own.
        thresholds: the cuts on its scores it owns (``Threshold``); a judgment learned from its
            own rows (``example``) owns its ``keep``.
        example: ``example(row) -> (items, label)``: one labeled row of ``rows`` as ``inputs``'
            items and its truth. A judgment that has it is trained on those rows alone
            (``optimize.training.train.fit_from_rows``, its keep threshold the best F1's); the three
            above have none: their pairs come from several sources (``optimize.training.pairs``).
    """

    name: str
    signature: type
    predictor: str
    rows: str
    feature_names: tuple[str, ...]
    inputs: Callable[..., Inputs]
    candidates: tuple[str, ...] = CANDIDATES
    reads: "Judgment | None" = None
    example: Callable[[dict], tuple[dict, bool]] | None = None
    thresholds: tuple[Threshold, ...] = ()

    @property
    def keep(self) -> Threshold:
        """The keep threshold of a judgment learned from its own rows (its best F1's, when fit)."""
        return Threshold(f"{self.name}_keep", 0.5)

    @property
    def judge(self) -> "Judgment":
        """The judgment whose trained judge scores this one: itself, or the one it ``reads``."""
        return self.reads or self

    def __str__(self) -> str:
        return self.name


def judged_text(passage) -> str:
    """The text a judge reads for ``passage``: a web page's title, then its text.

    A knowledge-base chunk states its subject in its text, as the training passages do; a web
    page's paragraphs often do not ("In 1996 Chiculiță retired as an athlete..."): its subject
    is the page title, so the title is read too, or the page looks like a namesake's.
    """
    title = (passage.title or "").strip()
    if passage.source != "web" or not title or passage.text.lstrip().startswith(title):
        return passage.text
    return f"{title}. {passage.text}"


def strip_inputs(question: str, strip: str, cosine: float, source,
                 passage_cosine: float) -> tuple[list[float], list[str]]:
    """The strip judge's inputs ``(dense features, cue pairs)`` for one strip (CRAG §4.4).

    Args:
        strip: the strip's text; cosine: its cosine with the question.
        source: the ``Passage`` it came from (None: the strip is its own context).
        passage_cosine: the source passage's cosine with the question (``judged_text``).

    A web page's sentence is about the page's subject, so it is read with the page's title,
    as the page is (``judged_text``). Training (``optimize.training.pairs``) builds its rows here too.
    """
    context = judged_text(source) if source is not None else strip
    text = judged_text(replace(source, text=strip)) if source is not None else strip
    return strip_features(question, text, cosine, context, passage_cosine), cue_pairs(question, text)


def passage_cosines(encode, question: str, passages) -> list[float]:
    """Question-passage cosines: a knowledge-base passage's retrieval score (``passage.score``),
    else embedded here (``judged_text``, cut to 2,000 characters: a web page can be long)."""
    cosines = [p.score if p.source == "kb" and p.score else None for p in passages]
    missing = [i for i, c in enumerate(cosines) if c is None]
    if missing:
        vectors = encode([question] + [judged_text(passages[i])[:2000] for i in missing])
        for i, v in zip(missing, vectors[1:] @ vectors[0]):
            cosines[i] = float(v)
    return cosines


def _passage_inputs(encode, question: str, passages) -> Inputs:
    """Per passage (``program.types.Passage``): its features against the question."""
    return [(passage_features(question, judged_text(p), c), cue_pairs(question, judged_text(p)))
            for p, c in zip(passages, passage_cosines(encode, question, passages))]


def _strip_inputs(encode, question: str, strips, passages, cosines: list[float] | None = None) -> Inputs:
    """Per strip (``program.types.Strip``), read with the passage it came from (``passages``);
    ``cosines``: question-strip cosines when the caller already embedded the strips."""
    if not strips:
        return []
    if cosines is None:
        vectors = encode([question] + [s.text for s in strips])
        cosines = (vectors[1:] @ vectors[0]).tolist()
    by_id = {p.id: p for p in passages}
    passage_cos = dict(zip((p.id for p in passages), passage_cosines(encode, question, passages)))
    return [strip_inputs(question, s.text, float(c), by_id.get(s.source_id), float(passage_cos.get(s.source_id, 0.0)))
            for s, c in zip(strips, cosines)]


def _support_inputs(encode, claim: str, evidence: str, lexical_verdict: float, question: str = "") -> Inputs:
    """One item: the claim against the evidence; ``question``'s own words are not evidence of it."""
    sentences = evidence_sentences(evidence) or [evidence]
    vectors = encode([claim, evidence[:2000]] + sentences)
    cosines = (vectors[2:] @ vectors[0]).tolist()
    return [(support_features(claim, sentences, cosines, float(vectors[1] @ vectors[0]), lexical_verdict, question),
             None)]


PASSAGE = Judgment("passage", GradeRetrieval, "evaluator.grade", "grading", tuple(PASSAGE_NAMES), _passage_inputs)
STRIP = Judgment("strip", StripRelevance, "refiner.grade", "strips", tuple(STRIP_NAMES), _strip_inputs,
                 thresholds=(STRIP_KEEP,))
SUPPORT = Judgment("support", CheckClaimSupport, "checker.support", "support", tuple(SUPPORT_NAMES), _support_inputs,
                   thresholds=(SUPPORT_PARTIALLY, SUPPORT_FULLY))
# IsUse has no labeled rows: the passage judge reads the answer as a passage (program.stages.usefulness)
USEFULNESS = Judgment("usefulness", JudgeUsefulness, "usefulness.judge", "", tuple(PASSAGE_NAMES), _passage_inputs,
                      candidates=("trained", "lm"), reads=PASSAGE)

JUDGMENTS: dict[str, Judgment] = {j.name: j for j in (PASSAGE, STRIP, SUPPORT, USEFULNESS)}
TRAINED = tuple(j for j in JUDGMENTS.values() if j.reads is None)  # each has a trained judge of its own


def as_judgment(name_or_record) -> Judgment:
    """The record for a judgment's name (as ``judges.json`` and the compile's report store it).

    Raises:
        KeyError: no judgment has that name."""
    return name_or_record if isinstance(name_or_record, Judgment) else JUDGMENTS[name_or_record]
