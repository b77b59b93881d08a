"""Knowledge refinement: decompose-then-recompose (CRAG §4.4).

Each passage is decomposed into knowledge strips (sentences; a fragment under ``min_words``
words is joined to its neighbour); the strips are pre-filtered by embedding similarity to the
question (cheap, no LM call), which bounds the LM calls of a refinement at ``prefilter_top``;
each survivor is graded by one ``StripRelevance`` call (temperature 0) that copies the answer
out of it or says NONE; and the strips whose copy checks out are recomposed in source order,
each keeping its source id. (Grading all strips in one call was tried and dropped: the 1.5B
model then named a strip for nearly every question, answerable or not.)
"""

from __future__ import annotations

import re

import dspy
import numpy as np

from program.lm import CRITIQUE_CONFIG
from program.text import clean_copy, coverage, is_none
from program.types import Passage, Strip
from signatures import StripRelevance

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def score_span(span: str, strip: str) -> float:
    """Relevance of a strip from the answer span StripRelevance copied out of it.

    Returns 1.0 when the span appears in the strip verbatim (case-insensitive), 0.5 when most
    of its content words do (a loose copy), 0.0 for NONE, an empty copy, or words the strip
    does not contain (the model answered from elsewhere).
    """
    span = clean_copy(span)
    if is_none(span):
        return 0.0
    if span.lower() in strip.lower():
        return 1.0
    return 0.5 if coverage(span, strip) >= 0.6 else 0.0


def decompose(passage: Passage, strip_words: int = 50, min_words: int = 6) -> list[Strip]:
    """Split a passage into knowledge strips: one sentence each, short fragments joined.

    A sentence (or the strip so far) shorter than ``min_words`` words is joined with its
    neighbour while the strip stays within ``strip_words`` words, so that headings and
    fragments like "Early life." do not stand alone. Returns strips with ``position`` in
    source order.
    """
    sentences = [s.strip() for para in passage.text.split("\n") for s in _SENTENCE_END.split(para) if s.strip()]
    strips: list[str] = []
    for sentence in sentences:
        short = strips and min(len(strips[-1].split()), len(sentence.split())) < min_words
        if short and len(strips[-1].split()) + len(sentence.split()) <= strip_words:
            strips[-1] = f"{strips[-1]} {sentence}"
        else:
            strips.append(sentence)
    return [Strip(source_id=passage.id, position=i, text=t, url=passage.url) for i, t in enumerate(strips)]


class KnowledgeRefiner(dspy.Module):
    """Decompose passages into strips, grade each strip, recompose the relevant ones.

    Args:
        embedder: object with ``encode(list[str]) -> np.ndarray`` of L2-normalised rows, used
            to pre-filter strips by cosine similarity to the question before any LM call;
            None sends every strip to the LM.
        prefilter_top: strips kept by the pre-filter and graded by the LM, one call each (at most).
        max_strips: strips kept after grading (the best ``n`` of CRAG's recomposition).
        keep_threshold: a strip is kept when its score (``score_span``) is at least this;
            0.5 keeps loose copies of the answer, 1.0 only verbatim ones.
        strip_words: the strip window in words.

    Edge behaviour: a strip whose grading output cannot be parsed scores 0 (dropped:
    unverified knowledge is not used) and ``last_note`` counts it. When no strip
    reaches the threshold nothing is kept: an irrelevant source contributes nothing.

    Example:
        >>> strips = KnowledgeRefiner(embedder)(question="Who wrote Dune?", passages=passages)
    """

    def __init__(self, embedder=None, prefilter_top: int = 4, max_strips: int = 4, keep_threshold: float = 0.5,
                 strip_words: int = 50):
        super().__init__()
        self.grade = dspy.Predict(StripRelevance)
        self.embedder = embedder
        self.prefilter_top = prefilter_top
        self.max_strips = max_strips
        self.keep_threshold = keep_threshold
        self.strip_words = strip_words
        self.last_note = ""

    def forward(self, question: str, passages: list[Passage]) -> list[Strip]:
        strips = [s for p in passages for s in decompose(p, self.strip_words)]
        seen: set[str] = set()  # the same sentence twice (duplicated documents) is graded once
        strips = [s for s in strips if not (s.text in seen or seen.add(s.text))]
        candidates = self._prefilter(question, strips)
        failures = 0
        for strip in candidates:
            try:
                out = self.grade(question=question, strip=strip.text, config=CRITIQUE_CONFIG)
                strip.relevance = score_span(out.answer_span, strip.text)
            except Exception:  # unparseable output: the strip is not trusted
                strip.relevance, failures = 0.0, failures + 1
        kept = sorted((s for s in candidates if s.relevance >= self.keep_threshold), key=lambda s: -s.relevance)
        kept = kept[: self.max_strips]
        self.last_note = f"graded {len(candidates)} of {len(strips)} strips, kept {len(kept)}" + (
            f"; {failures} unparseable" if failures else "")
        order = {p.id: n for n, p in enumerate(passages)}
        return sorted(kept, key=lambda s: (order.get(s.source_id, 0), s.position))

    def _prefilter(self, question: str, strips: list[Strip]) -> list[Strip]:
        if self.embedder is None or len(strips) <= self.prefilter_top:
            return strips
        vectors = self.embedder.encode([question] + [s.text for s in strips])
        similarity = vectors[1:] @ vectors[0]
        top = np.argsort(-similarity)[: self.prefilter_top]
        return [strips[i] for i in sorted(top)]
