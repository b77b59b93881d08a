"""Strip relevance: CRAG §4.4's decompose-then-recompose filter, one score in [0, 1] per knowledge strip.

The trained judge reads the strip as a passage (``program.judgments.passage``) plus the context
it came from (a strip that starts with a pronoun is about whoever its passage is about); the
prompted candidate is ``StripRelevance``. The slice owns its one threshold, ``keep`` (a strip
scored at or above it is kept; ``StripThresholds``): ``kept`` and ``keep_threshold`` read it,
``fit_thresholds`` fits it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from program.judgments.features import cue_pairs, name_signals
from program.judgments.base import GRID, Inputs, Judgment, f1, judged_text, passage_cosines
from program.judgments.passage import PASSAGE_NAMES, passage_features
from signatures import StripRelevance

_PRONOUN_START = re.compile(r"^(he|she|it|they|his|her|its|their|this|these)\b", re.I)
STRIP_NAMES = PASSAGE_NAMES + ["pronoun_start", "passage_name_coverage", "passage_cosine"]


def strip_features(question: str, strip: str, cosine: float, passage: str, passage_cosine: float) -> list[float]:
    """``passage_features`` of the strip, plus the context it came from.

    A strip that starts with a pronoun ("He was a journalist.") is about whoever its passage is
    about, so the passage's name coverage and cosine are read too. ``len(STRIP_NAMES)`` floats.
    """
    passage_name_cov = name_signals(question, passage)[0]
    return passage_features(question, strip, cosine) + [
        float(bool(_PRONOUN_START.match(strip.strip()))), passage_name_cov, passage_cosine]


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


def _inputs(encode, question: str, strips, passages, cosines: list[float] | None = None) -> Inputs:
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


@dataclass(frozen=True)
class StripThresholds:
    """The strip judgment's one cut: a strip scored at or above ``keep`` is kept (CRAG §4.4).
    Saved in ``judges.json``'s ``thresholds``."""

    keep: float = 0.5

    @classmethod
    def of(cls, judges, default: float | None = None) -> "StripThresholds":
        """The threshold fit for ``judges`` (a ``JudgeSet``), else ``default``, else 0.5."""
        return cls(judges.thresholds.get("strip_keep", cls.keep if default is None else default))

    def saved(self) -> dict[str, float]:
        """As ``JudgeSet.thresholds`` stores it."""
        return {"strip_keep": self.keep}


def keep_threshold(judges, default: float | None = None) -> float:
    """The keep threshold fit for ``judges``, else ``default``, else 0.5 (``StripThresholds.of``)."""
    return StripThresholds.of(judges, default).keep


def kept(judges, scores) -> np.ndarray:
    """Booleans: which trained strip scores reach ``judges``' keep threshold."""
    return np.asarray(scores) >= keep_threshold(judges)


def fit_thresholds(labels, scores) -> StripThresholds:
    """The keep threshold of the best F1 on out-of-fold ``scores`` (ties: nearest 0.5)."""
    scores = np.asarray(scores)
    return StripThresholds(max(GRID, key=lambda t: (f1(labels, scores >= t), -abs(t - 0.5))))


STRIP = Judgment("strip", StripRelevance, lambda crag: crag.refiner.grade, "strips", tuple(STRIP_NAMES), _inputs,
                 thresholds=StripThresholds)
JUDGMENT = STRIP
