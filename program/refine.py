"""Knowledge refinement: decompose-then-recompose (CRAG §4.4).

Each passage is decomposed into knowledge strips (sentences; a fragment under ``min_words``
words is joined to its neighbour); the strips are pre-filtered by embedding similarity to the
question (cheap, no LM call); the survivors are graded together by one ``StripRelevance``
call (temperature 0), which copies the answer out of each numbered strip that states it; and
the strips whose copy checks out are recomposed in source order, each keeping its source id.
One call per refinement, not one per strip, is the cost cut of issue 5: the strips are short,
so the batched prompt costs little more than one of the per-strip prompts did.
"""

from __future__ import annotations

import json
import re

import dspy
import numpy as np

from program.lm import CRITIQUE_CONFIG
from program.text import clean_copy, coverage, is_none
from program.types import Passage, Strip
from signatures import StripRelevance

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_BARE_NUMBERS = re.compile(r"^(?:\[\s*\d+(?:\s*,\s*\d+)*\s*\]|\d+(?:\s*,\s*\d+)+)$")  # "[1, 3]", "[2]", "1, 3"
_NUMBERED = re.compile(r"^\s*\[?(\d+)\]?[\s:.)-]+(.*)$", re.S)


def numbered(texts: list[str]) -> list[str]:
    """Texts as the model sees them: ``["[1] text", "[2] text", ...]``."""
    return [f"[{i}] {t}" for i, t in enumerate(texts, start=1)]


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


def span_items(spans) -> list:
    """StripRelevance's output as items: ``"[n] words"`` strings and bare strip numbers.

    Accepts a string (one item per line; a JSON list is read as a list; numbers with no words,
    like ``"[1, 3]"``, are bare numbers) or a list of strings and ints. Anything else: no items.
    """
    if isinstance(spans, str):
        text = spans.strip()
        if _BARE_NUMBERS.match(text):
            return [int(n) for n in re.findall(r"\d+", text)]
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        spans = parsed if isinstance(parsed, list) else [line for line in text.splitlines() if line.strip()]
    if not isinstance(spans, list):
        return []
    return [item if isinstance(item, int) and not isinstance(item, bool) else str(item) for item in spans]


def score_spans(spans, strips: list[str]) -> list[float]:
    """Relevance of each strip from StripRelevance's ``"[n] copied words"`` items (``span_items``).

    Args:
        spans: the model's output, a string or a list (see ``span_items``).
        strips: the strip texts, strip ``n`` being ``strips[n - 1]``.

    Returns:
        one score per strip, the best ``score_span`` of the items aimed at it. An item
        whose number is missing or wrong is checked against every strip, so a misnumbered
        copy still counts for the strip that holds it verbatim; a strip no item names scores 0.
        A bare number (the model named the strip but copied nothing) scores 0.5, like a
        loose copy: the 1.5B model answers that way for about one question in seven.
    """
    scores = [0.0] * len(strips)
    for item in span_items(spans):
        if isinstance(item, int):
            if 1 <= item <= len(strips):
                scores[item - 1] = max(scores[item - 1], 0.5)
            continue
        match = _NUMBERED.match(item)
        n, copy = (int(match.group(1)), match.group(2)) if match else (0, item)
        if 1 <= n <= len(strips) and score_span(copy, strips[n - 1]) > 0:
            scores[n - 1] = max(scores[n - 1], score_span(copy, strips[n - 1]))
        else:  # missing or wrong number: credit every strip that holds the copy verbatim
            for i, strip in enumerate(strips):
                if score_span(copy, strip) == 1.0:
                    scores[i] = 1.0
    return scores


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
        prefilter_top: strips kept by the pre-filter and graded by the LM (at most).
        max_strips: strips kept after grading (the best ``n`` of CRAG's recomposition).
        keep_threshold: a strip is kept when its score (``score_span``) is at least this;
            0.5 keeps loose copies of the answer, 1.0 only verbatim ones.
        strip_words: the strip window in words.

    Edge behaviour: when the grading output cannot be parsed, every candidate scores 0 (all
    dropped: unverified knowledge is not used) and ``last_note`` says so. When no strip
    reaches the threshold nothing is kept: an irrelevant source contributes nothing.

    Example:
        >>> strips = KnowledgeRefiner(embedder)(question="Who wrote Dune?", passages=passages)
    """

    def __init__(self, embedder=None, prefilter_top: int = 5, max_strips: int = 4, keep_threshold: float = 0.5,
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
        failure = ""
        if candidates:
            try:
                out = self.grade(question=question, strips=numbered([s.text for s in candidates]),
                                 config=CRITIQUE_CONFIG)
                scores = score_spans(out.answer_spans, [s.text for s in candidates])
            except Exception as exc:  # unparseable output: no strip is trusted
                scores, failure = [0.0] * len(candidates), f"; grading output unparseable ({type(exc).__name__})"
            for strip, score in zip(candidates, scores):
                strip.relevance = score
        kept = sorted((s for s in candidates if s.relevance >= self.keep_threshold), key=lambda s: -s.relevance)
        kept = kept[: self.max_strips]
        self.last_note = f"graded {len(candidates)} of {len(strips)} strips in one call, kept {len(kept)}{failure}"
        order = {p.id: n for n, p in enumerate(passages)}
        return sorted(kept, key=lambda s: (order.get(s.source_id, 0), s.position))

    def _prefilter(self, question: str, strips: list[Strip]) -> list[Strip]:
        if self.embedder is None or len(strips) <= self.prefilter_top:
            return strips
        vectors = self.embedder.encode([question] + [s.text for s in strips])
        similarity = vectors[1:] @ vectors[0]
        top = np.argsort(-similarity)[: self.prefilter_top]
        return [strips[i] for i in sorted(top)]
