"""Knowledge refinement: decompose-then-recompose (CRAG §4.4).

Each passage is decomposed into knowledge strips (sentences; a fragment under ``min_words``
words is joined to its neighbour); the strips are pre-filtered by embedding similarity to the
question (cheap, no LM call), which bounds the LM calls of a refinement at ``prefilter_top``;
each strip is scored in [0, 1], by the trained strip judge (``program.judges``, no LM call)
or by one ``StripRelevance`` call (temperature 0) that copies the answer out of it or says
NONE, or by the cascade of both; and the strips at or above the keep threshold are
recomposed, best-scoring first, each keeping its source id. (Grading all strips in one LM
call was tried and dropped: the 1.5B model then named a strip for nearly every question,
answerable or not.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import dspy
import numpy as np

from program.guards.caps import report_cap
from program.judgments import STRIP
from program.judgments.strip import keep_threshold
from program.judges.store import who_judges
from program.lm.configure import CRITIQUE_CONFIG
from program.stages.events import emit
from program.stages.instructions import set_aside_instructions
from program.text import clean_copy, content_words, coverage, is_none, sentences, spelled_as_digits
from program.types import Passage, Strip
from signatures import StripRelevance



@dataclass
class RefineReport:
    """What one refinement did, for the trace and the page.

    Attributes:
        graded: every strip the refinement made (kept or not), each with its relevance in
            [0, 1], or -1.0 when the pre-filter left it ungraded.
        kept: the strips kept, best first.
        threshold: the keep threshold in force.
        note: one line for the step's notes.
    """

    graded: list[Strip] = field(default_factory=list)
    kept: list[Strip] = field(default_factory=list)
    threshold: float = 0.0
    note: str = ""


# The last refinement's report, per thread and per asyncio task: one loaded program answers
# many questions at once, so this cannot live on the (shared) module.
def _holds(source: str, copy: str) -> bool:
    """True when ``copy`` stands in ``source`` as whole words (case-insensitive): "5" is not a
    copy out of "1958"."""
    return re.search(rf"(?<!\w){re.escape(copy)}(?!\w)", source, re.I) is not None


def score_span(span: str, strip: str) -> float:
    """Relevance of a strip from the answer span StripRelevance copied out of it.

    Returns 1.0 when the span appears in the strip verbatim (case-insensitive), 0.5 when most
    of its content words do (a loose copy), 0.0 for NONE, an empty copy, or words the strip
    does not contain (the model answered from elsewhere). Spelled numbers count as their digits
    ("12 seconds" is a verbatim copy of "twelve seconds": ``program.text.spelled_as_digits``).
    """
    span = clean_copy(span)
    if is_none(span):
        return 0.0
    spellings = ((span, strip), (spelled_as_digits(span), spelled_as_digits(strip)))
    if any(_holds(source, copy) for copy, source in spellings):
        return 1.0
    if not content_words(span):  # "5", "a": nothing to cover, only a whole-word copy counts
        return 0.0
    return 0.5 if max(coverage(copy, source) for copy, source in spellings) >= 0.6 else 0.0


# A list item: "- …", "* …", "+ …", "• …" or "1. …" / "1) …" at the start of its line.
_LIST_ITEM = re.compile(r"^(?:[-*+\u2022]|\d{1,3}[.)])\s+")


def _lead_in(sentence: str, max_words: int) -> bool:
    """True for a sentence that introduces a list: it ends in a colon (markup aside) and is
    no list item itself ("Paylane will never ask you to:")."""
    return (sentence.rstrip("*_ ").endswith(":") and not _LIST_ITEM.match(sentence)
            and len(sentence.split()) <= max_words)


def decompose(passage: Passage, strip_words: int = 50, min_words: int = 6,
              lead_in_words: int = 30) -> list[Strip]:
    """Split a passage into knowledge strips: one sentence each, short fragments joined.

    A sentence (or the strip so far) shorter than ``min_words`` words is joined with its
    neighbour while the strip stays within ``strip_words`` words, so that headings and
    fragments like "Early life." do not stand alone. A list item keeps the sentence that
    introduces its list (one of at most ``lead_in_words`` words ending in a colon): cut from
    "Paylane will never ask you to:", the item "- move money to a 'safe account'" reads as
    advice, and a strip must say what its passage says (CRAG §4.4 refines strips, it does not
    change their meaning). The lead-in then stands in each of its items' strips, not alone.
    Returns strips with ``position`` in source order.
    """
    strips: list[str] = []
    lead_in = ""
    for sentence in sentences(passage.text):
        if lead_in and _LIST_ITEM.match(sentence):
            if strips and strips[-1] == lead_in:
                strips.pop()  # carried by each item from here on
            strips.append(f"{lead_in} {sentence}")
            continue
        lead_in = sentence if _lead_in(sentence, lead_in_words) else ""
        short = strips and min(len(strips[-1].split()), len(sentence.split())) < min_words
        if short and len(strips[-1].split()) + len(sentence.split()) <= strip_words:
            strips[-1] = f"{strips[-1]} {sentence}"
        else:
            strips.append(sentence)
    return [Strip(source_id=passage.id, position=i, text=t, url=passage.url, title=passage.title,
                  page=passage.page)
            for i, t in enumerate(strips)]


class KnowledgeRefiner(dspy.Module):
    """Decompose passages into strips, grade each strip, recompose the relevant ones.

    Args:
        embedder: object with ``encode(list[str]) -> np.ndarray`` of L2-normalised rows, used
            to pre-filter strips by cosine similarity to the question before any LM call;
            None sends every strip to the LM.
        prefilter_top: strips kept by the pre-filter and graded by the LM, one call each (at most).
        max_strips: strips kept after grading (the best ``n`` of CRAG's recomposition).
        keep_threshold: a strip is kept when its score is at least this (LM scores from
            ``score_span``: 0.5 keeps loose copies of the answer, 1.0 only verbatim ones); with
            trained judges their calibrated ``strip_keep`` replaces it.
        strip_words: the strip window in words.
        judges: a ``program.judges.JudgeSet``, or None to grade with ``StripRelevance`` only.
            With judges, every strip gets a trained score (no LM call, no pre-filter needed);
            the LM grades only what the strip judge's ``JudgeChoice`` hands it (``lm``: the
            pre-filtered strips; ``cascade``: the pre-filtered strips whose trained score is in
            the band), and its score then stands.

    ``forward(question, passages, relevant_ids=()) -> RefineReport`` (its ``kept`` strips, best
    first; ``relevant_ids``: the ids of passages the evaluator graded relevant). With trained strip scores, when no
    strip reaches the threshold but such a
    passage exists, its best-scoring strips (up to ``fallback_strips``) are kept anyway: the
    evaluator's confidence in the passage outranks the strip judge's doubt about each
    sentence. An LM strip grade of NONE is not rescued here: ``CRAG`` first runs the correction
    (the evaluator may have been wrong), and keeps the relevant passage's ``nearest`` strips only
    when the correction found nothing.

    Before decomposition, sentences that address the model ("Ignore all previous instructions
    and ...", "Note to AI assistants: ...") are set aside (``program.stages.instructions``) and counted
    in the report's ``note``: they are never strips, whatever a judge would score them.

    Edge behaviour: a strip whose LM grading output cannot be parsed scores 0 (dropped:
    unverified knowledge is not used) and the report's ``note`` counts it. When no strip reaches
    the threshold and no passage was graded relevant, nothing is kept: an irrelevant source
    contributes nothing. Kept strips are ordered by score, best first (ties in source order).

    Example:
        >>> strips = KnowledgeRefiner(embedder)(question="Who wrote Dune?", passages=passages).kept
    """

    def __init__(self, embedder=None, prefilter_top: int = 4, max_strips: int = 4, keep_threshold: float = 0.5,
                 strip_words: int = 50, judges=None, fallback_strips: int = 2):
        super().__init__()
        self.judges = judges
        self.fallback_strips = fallback_strips
        self.grade = dspy.Predict(StripRelevance)
        self.embedder = embedder
        self.prefilter_top = prefilter_top
        self.max_strips = max_strips
        self.keep_threshold = keep_threshold
        self.strip_words = strip_words

    def forward(self, question: str, passages: list[Passage], relevant_ids=(), stage: str = "internal") -> RefineReport:
        """The passages' strips graded and the best kept (the class docstring); a ``strips``
        event names ``stage`` (``internal`` | ``corrected``: the correction's passages)."""
        report = self._refine(question, passages, relevant_ids)
        kept = {id(s) for s in report.kept}
        emit("strips", stage=stage, kept=report.kept, dropped=[s for s in report.graded if id(s) not in kept],
             threshold=report.threshold)
        return report

    def _refine(self, question: str, passages: list[Passage], relevant_ids) -> RefineReport:
        # sentences that address the model are not knowledge (program.stages.instructions)
        cleaned = [set_aside_instructions(p) for p in passages]
        passages, set_aside = [p for p, _ in cleaned], sum(len(r) for _, r in cleaned)
        strips = [s for p in passages for s in decompose(p, self.strip_words)]
        seen: set[str] = set()  # the same sentence twice (duplicated documents) is graded once
        strips = [s for s in strips if not (s.text in seen or seen.add(s.text))]
        similarity = self._similarity(question, strips)
        choice = who_judges(self.judges, STRIP)
        trained = choice.trained
        threshold = keep_threshold(self.judges, self.keep_threshold) if trained else self.keep_threshold
        if trained:
            scores = self.judges.score(STRIP, question=question, strips=strips, passages=passages, cosines=similarity)
            for strip, score in zip(strips, scores):
                strip.relevance = round(score, 4)
            ask = [s for s in self._prefilter(strips, similarity) if choice.asks_lm(s.relevance)]
        else:
            ask = self._prefilter(strips, similarity)
        failures = sum(not self._grade_lm(question, strip) for strip in ask)
        graded = strips if trained else ask
        order = {p.id: n for n, p in enumerate(passages)}
        ranked = sorted(graded, key=lambda s: (-s.relevance, order.get(s.source_id, 0), s.position))
        above = [s for s in ranked if s.relevance >= threshold]
        kept = above[: self.max_strips]
        if len(above) > self.max_strips:
            report_cap("strips", self.max_strips,
                       f"kept the best {self.max_strips} of {len(above)} strips above {threshold}")
        rescued = ""
        if not kept and relevant_ids and trained:
            kept = [s for s in ranked if s.source_id in set(relevant_ids)][: self.fallback_strips]
            rescued = f"; none above {threshold}, kept the best {len(kept)} of the relevant passage(s)"
        note = (f"scored {len(graded)} of {len(strips)} strips ({len(ask)} by the LM), kept {len(kept)} "
                f"at threshold {threshold}" + rescued + (f"; {failures} unparseable" if failures else "")
                + (f"; set aside {set_aside} sentence(s) addressing the model" if set_aside else ""))
        return RefineReport(graded=strips, kept=kept, threshold=threshold, note=note)

    def nearest(self, question: str, passages: list[Passage], n: int | None = None) -> list[Strip]:
        """The ``n`` strips of ``passages`` nearest the question (default ``fallback_strips``), no LM call.

        Decomposed as ``forward`` decomposes (sentences addressing the model set aside first),
        ranked by the embedder's cosine to the question, best first; without an embedder, the
        first ``n`` in source order. Used when the evaluator's verdict on a passage outranks the
        strip grader's (``program.stages.crag``: CORRECT, every strip graded NONE, and the
        correction found nothing). Returns ``[]`` for no passages.
        """
        n = self.fallback_strips if n is None else n
        strips = [s for p in passages for s in decompose(set_aside_instructions(p)[0], self.strip_words)]
        seen: set[str] = set()
        strips = [s for s in strips if not (s.text in seen or seen.add(s.text))]
        similarity = self._similarity(question, strips)
        if similarity is None:
            return strips[:n]
        return [strips[i] for i in np.argsort(-np.asarray(similarity), kind="stable")[:n]]

    def _grade_lm(self, question: str, strip: Strip) -> bool:
        """Score one strip with ``StripRelevance``; False when the output cannot be parsed."""
        try:
            out = self.grade(question=question, strip=strip.text, config=CRITIQUE_CONFIG)
            strip.relevance = score_span(out.answer_span, strip.text)
            return True
        except Exception:  # unparseable output: the strip is not trusted
            strip.relevance = 0.0
            return False

    def _similarity(self, question: str, strips: list[Strip]) -> list[float] | None:
        """Question-strip cosines (one embedding pass, shared by the pre-filter and the judge)."""
        if self.embedder is None or not strips:
            return None
        vectors = self.embedder.encode([question] + [s.text for s in strips])
        return (vectors[1:] @ vectors[0]).tolist()

    def _prefilter(self, strips: list[Strip], similarity: list[float] | None) -> list[Strip]:
        if similarity is None or len(strips) <= self.prefilter_top:
            return strips
        top = np.argsort(-np.asarray(similarity))[: self.prefilter_top]
        return [strips[i] for i in sorted(top)]
