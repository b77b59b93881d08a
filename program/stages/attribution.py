"""Citations by attribution: every answer sentence cites the strip that supports it.

ALCE (Gao et al. 2023 §2) scores an answer's citations per statement: citation recall (the
cited passages support the statement) and citation precision (each cited passage is needed).
A 1.5B generator rarely writes ``[n]`` markers, and when it does they can point at the wrong
strip. The program already knows how to judge support (Self-RAG's IsSup, the trained support
judge of ``program.judges``), so it cites for the model: each sentence of the answer keeps the
generator's markers whose strip supports it, and a sentence left without one cites the strip
that supports it best. A sentence no strip supports cites nothing and is marked unsupported.
No LM call: the self-check's rule (``program.stages.selfcheck.decide_support``) with the LM left
out: the trained support judge scores, or, with no trained judge, the word-overlap verdict of
``program.stages.selfcheck.lexical_support`` decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

import dspy

from program.guards.cost import step
from program.stages.events import emit
from program.stages.generation import cited_numbers
from program.stages.selfcheck import (RANKED_VERDICTS, VERDICT_VALUE, decide_support, evidence_sentences,
                                      is_abstention, strip_citations)
from program.types import AnswerSentence, Citation, CRAGResult, Strip

# "…in 1965. [1] It…": a marker after the full stop belongs to the sentence before it, when a
# sentence follows; in "Lane Capital Bank, N.A. [2] about Paylane" the stop is an abbreviation's.
_MARKER_AFTER_STOP = re.compile(r"([.!?])((?:\s*\[\d+\])+)(?=\s*\Z|\s+[^\sa-z])")
# a line break inside a sentence: the reader copied a hard-wrapped source line ("If the\n  detailee has …",
# a list item's continuation); a next line that starts with a key ("  name: web", YAML) is a line of its own
_WRAPPED = re.compile(r"(?<![.!?:;\]`])[ \t]*\n[ \t]*(?=[a-z(])(?![\w.-]+:(?:\s|$))")
_END = re.compile(r"^(.*?)([.!?…:]*)$", re.S)
# Where a sentence joins two independent clauses: ", and if you reuse…", "; …", ", but …".
_CLAUSE_JOIN = re.compile(r"\s*;\s+|,\s+(?:and|but|while|whereas|so)\s+")


def clauses(sentence: str, min_words: int = 3) -> list[str]:
    """The independent clauses of a sentence joined by ", and" / ", but" / ";" (each of at least
    ``min_words`` words), or ``[sentence]`` when it has none: the units one strip can state.

    >>> clauses("Keys can be up to 255 characters, and if you reuse one, Paylane rejects it.")
    ['Keys can be up to 255 characters', 'if you reuse one, Paylane rejects it.']
    """
    parts = [p.strip() for p in _CLAUSE_JOIN.split(sentence) if p.strip()]
    return parts if len(parts) > 1 and all(len(p.split()) >= min_words for p in parts) else [sentence]


def answer_sentences(answer: str) -> list[str]:
    """The answer's sentences, each with the markers written for it (ALCE's statements); a line
    break inside a sentence (a hard-wrapped line copied from the source) joins its two lines."""
    answer = _MARKER_AFTER_STOP.sub(lambda m: f"{m.group(2)}{m.group(1)}", answer.strip())
    if "```" not in answer:  # a code block's lines stay lines
        answer = _WRAPPED.sub(" ", answer)
    return [s.strip() for s in evidence_sentences(answer)]  # the self-check's splitter: claims cut alike


def support(sentence: str, strip: Strip, question: str, judges=None) -> tuple[str, float]:
    """Self-RAG's IsSup verdict for one sentence against one strip, with no LM call.

    Args:
        sentence: the sentence, markers removed.
        strip: the strip it may cite.
        question: the question answered (its own words are not evidence, and the asked
            entity's name is left out of the check: ``without_asked_entity``).
        judges: a ``program.judges.JudgeSet`` with a trained ``support`` judge, or None.

    Returns:
        ``(verdict, score)``: ``fully | partially | no`` and a score in [0, 1] that ranks
        strips (the trained judge's probability, or 1.0 / 0.5 / 0.0 for the overlap verdict).
        ``("no", 0.0)`` when the question asks a role the strip does not state for the
        sentence's answer (``program.stages.relation.states_role``).
    """
    decided = decide_support(sentence, strip.text, question, judges)  # quote=None: no LM call
    if decided.score is None:
        return decided.verdict, VERDICT_VALUE[decided.verdict]
    return decided.verdict, round(max(decided.score, VERDICT_VALUE[decided.lexical]), 4)


def cite_sentence(sentence: str, strips: list[Strip], question: str, judges=None) -> AnswerSentence:
    """One sentence with its citations: the generator's markers that hold, else the best strip.

    Returns an ``AnswerSentence`` whose ``cited`` holds 1-based strip numbers: the markers the
    sentence carried whose strip supports it (``by="model"`` when all of them held), else the
    one strip that supports it best (``by="attribution"``), else, for a sentence of several
    clauses, the strip that supports each clause (``clause_citations``), else none
    (``supported=False``, ``by="none"``).
    """
    text = strip_citations(sentence)
    written = cited_numbers(sentence, len(strips))
    verdicts = {n: support(text, strips[n - 1], question, judges) for n in written}
    held = [n for n in written if verdicts[n][0] != "no"]
    if held:
        return AnswerSentence(text, held, True, "model" if held == written else "attribution")
    scored = [(n, support(text, s, question, judges)) for n, s in enumerate(strips, start=1) if n not in verdicts]
    scored += list(verdicts.items())
    best = max(scored, key=lambda ns: (RANKED_VERDICTS.index(ns[1][0]), ns[1][1]), default=None)
    if best is not None and best[1][0] != "no":
        return AnswerSentence(text, [best[0]], True, "attribution")
    by_clause = clause_citations(text, strips, question, judges)
    if by_clause:
        return AnswerSentence(text, by_clause, True, "model" if by_clause == written else "attribution")
    return AnswerSentence(text, [], False, "none")


def clause_citations(sentence: str, strips: list[Strip], question: str, judges=None) -> list[int]:
    """For a sentence no single strip supports, the strips that support its clauses, one each.

    ALCE (Gao et al. 2023 §2.3) lets a statement cite several passages, its recall judged on the
    passages joined: "Keys can be up to 255 characters, and if you reuse a key…, Paylane rejects
    the request with HTTP 409" is stated by two strips, one per clause, and by neither alone.
    Returns the 1-based numbers of the best-supporting strip of each clause (``clauses``), in
    strip order, or ``[]`` when the sentence has one clause or any clause has no support.
    """
    parts = clauses(sentence)
    if len(parts) < 2:
        return []
    chosen = set()
    for part in parts:
        scored = [(n, support(part, s, question, judges)) for n, s in enumerate(strips, start=1)]
        n, (verdict, _) = max(scored, key=lambda ns: (RANKED_VERDICTS.index(ns[1][0]), ns[1][1]))
        if verdict == "no":
            return []
        chosen.add(n)
    return sorted(chosen)


def with_markers(sentence: AnswerSentence) -> str:
    """The sentence with its ``[n]`` markers before its closing punctuation: "… Herbert [1]."."""
    body, end = _END.match(sentence.text).groups()
    marks = "".join(f"[{n}]" for n in sentence.cited)
    return f"{body.rstrip()} {marks}{end}" if marks else sentence.text


def attribute(question: str, answer: str, strips: list[Strip], judges=None
              ) -> tuple[str, list[AnswerSentence], list[Citation]]:
    """Cite every sentence of ``answer`` by the strips that support it (module docstring).

    Args:
        question: the question answered.
        answer: the generated (or self-checked) answer, with or without ``[n]`` markers.
        strips: the numbered strips the generator saw, ``[1]`` first.
        judges: the trained judges (``JudgeSet``), or None for the word-overlap verdict.

    Returns:
        ``(answer, sentences, citations)``: the answer rewritten with one set of markers per
        sentence, the sentences with their citations and support, and one ``Citation`` per
        cited strip (in order of first citation, with the indices of the sentences citing
        it). An abstention, or an answer with no strips, comes back unchanged with no
        sentences and no citations.
    """
    if is_abstention(answer) or not strips:
        return answer, [], []
    sentences = [cite_sentence(s, strips, question, judges) for s in answer_sentences(answer)]
    citing: dict[int, list[int]] = {}
    for i, sentence in enumerate(sentences):
        for n in sentence.cited:
            citing.setdefault(n, []).append(i)
    citations = [Citation(n, strips[n - 1].source_id, strips[n - 1].url, strips[n - 1].text,
                          strips[n - 1].title, idx, strips[n - 1].page) for n, idx in citing.items()]
    return " ".join(with_markers(s) for s in sentences), sentences, citations



def citation_quality(question: str, sentences: list[AnswerSentence], strips: list[Strip], judges=None
                     ) -> tuple[float | None, float | None]:
    """ALCE's citation recall and precision of one answer (Gao et al. 2023 §2.3), the support
    judge standing in for ALCE's NLI model.

    Recall: the share of sentences whose cited strips, joined, support the sentence, or support
    each of its clauses (``clause_citations``); a sentence citing nothing counts 0. Precision:
    the share of citations that are needed: a citation of a supported sentence is imprecise
    when it does not support the sentence alone and the sentence's other citations do without
    it; every citation of an unsupported sentence is imprecise.

    Returns:
        ``(recall, precision)`` in [0, 1], each None when there is nothing to count (no
        sentence; no citation).
    """
    if not sentences:
        return None, None
    supported = 0
    needed = total = 0

    def holds(numbers: list[int], text: str) -> bool:
        if not numbers:
            return False
        joined = Strip("cited", 0, " ".join(strips[n - 1].text for n in numbers))
        if support(text, joined, question, judges)[0] != "no":
            return True
        cited = [strips[n - 1] for n in numbers]  # a compound sentence: each clause by a cited strip
        return len(clauses(text)) > 1 and bool(clause_citations(text, cited, question, judges))

    for s in sentences:
        cited = [n for n in s.cited if 1 <= n <= len(strips)]
        total += len(cited)
        if not holds(cited, s.text):
            continue
        supported += 1
        if len(cited) == 1:
            needed += 1
            continue
        needed += sum(holds([n], s.text) or not holds([m for m in cited if m != n], s.text) for n in cited)
    return round(supported / len(sentences), 4), (round(needed / total, 4) if total else None)


@dataclass
class Attribution:
    """What :class:`Attributor` returns: the answer with one set of markers per sentence, its
    sentences with their citations and support, and one ``Citation`` per cited strip."""

    answer: str
    sentences: list[AnswerSentence] = field(default_factory=list)
    citations: list[Citation] = field(default_factory=list)

    def summary(self) -> str:
        """The ``cite`` step's notes: ``2 sentence(s), 2 strip(s) cited, 1 unsupported``."""
        unsupported = sum(not s.supported for s in self.sentences)
        return (f"{len(self.sentences)} sentence(s), {len(self.citations)} strip(s) cited"
                + (f", {unsupported} unsupported" if unsupported else ""))


class Attributor(dspy.Module):
    """The citing stage: ``forward(question, answer, strips) -> Attribution`` (:func:`attribute`).

    A module, so that the step recorder sees it and the stream's last ``answer`` event carries
    the citations. ``judges``: the trained judges whose support judge scores (None: the
    word-overlap verdict); ``CRAG.judges`` sets it with the other stages'.
    """

    def __init__(self, judges=None):
        super().__init__()
        self.judges = judges

    def forward(self, question: str, answer: str, strips: list[Strip]) -> Attribution:
        out = Attribution(*attribute(question, answer, strips, self.judges))
        emit("answer", answer=out.answer, strict=False, closed_book=False, cited=True, sentences=out.sentences,
             citations=out.citations)
        return out


def cite(result: CRAGResult, answer: str, attributor: Attributor) -> CRAGResult:
    """``result`` with its ``answer``, ``sentences`` and ``citations`` set from ``answer`` over
    ``result.strips`` (a new ``CRAGResult``; ``result`` is left as it was), in a ``cite`` step of
    the trace (its notes: ``Attribution.summary``; no LM call). The baselines' citing step."""
    with step(result.trace, "cite") as cost:
        out = attributor(question=result.question, answer=answer, strips=result.strips)
        cost.notes = out.summary()
    return replace(result, answer=out.answer, sentences=out.sentences, citations=out.citations)
