"""Passage relevance: CRAG §4.2's retrieval evaluator, one score in [0, 1] per retrieved passage.

The trained judge reads whether the passage is about the question's entity and states the
asked fact (``passage_features``) and answer-type cue pairs; the prompted candidate is
``GradeRetrieval``. The evaluator's ``lower`` / ``upper`` thresholds on these scores are the
route's (``program.stages.settings``, calibrated per knowledge base by the compile), not the
judgment's: they decide an action, not a passage.
"""

from __future__ import annotations

import math

from program.judgments.features import STALE_CUES, cue_pairs, name_signals
from program.judgments.base import Inputs, Judgment, judged_text, passage_cosines
from program.question import parsed
from program.text import content_words
from signatures import GradeRetrieval

PASSAGE_NAMES = ["cosine", "name_coverage", "name_phrase", "name_early", "no_names", "content_coverage",
                 "log_words", "stale_cues"]


def passage_features(question: str, text: str, cosine: float) -> list[float]:
    """Signals that a passage is about the question's entity and states the asked fact.

    Args:
        question: the question.
        text: the passage text.
        cosine: embedding cosine similarity of question and passage, in [-1, 1].

    Returns:
        ``len(PASSAGE_NAMES)`` floats, in that order.
    """
    name_cov, phrase, early, no_names = name_signals(question, text)
    lowered = text.lower()
    stale = sum(cue in lowered for cue in STALE_CUES)
    asked = parsed(question).content_words  # coverage(question, text), the question's words parsed once
    covered = len(asked & content_words(text)) / len(asked) if asked else 1.0
    return [cosine, name_cov, phrase, early, no_names, covered,
            math.log1p(len(text.split())), float(stale)]


def passage_inputs(encode, question: str, passages) -> Inputs:
    """Per passage (``program.types.Passage``): its features against the question."""
    return [(passage_features(question, judged_text(p), c), cue_pairs(question, judged_text(p)))
            for p, c in zip(passages, passage_cosines(encode, question, passages))]


PASSAGE = Judgment("passage", GradeRetrieval, lambda crag: crag.evaluator.grade, "grading", tuple(PASSAGE_NAMES),
                   passage_inputs)
JUDGMENT = PASSAGE
