"""Claim-level self-check of the answer (Self-RAG's IsSup, Asai et al. 2023 §3.1).

The answer is split into atomic claims (``ExtractClaims``); each claim is checked against
the strips the answer cited, or all strips when the answer cited none. When one evidence
sentence already holds the claim's words (numbers and negation agreeing), the claim is fully
supported without an LM call. Otherwise the support judge the compile chose decides: the
trained support judge (``program.judges``, MiniCheck's idea: a small model trained on
perturbed claims, no LM call) scores it in [0, 1] and calibrated thresholds give its verdict;
or ``CheckClaimSupport`` (temperature 0) quotes the sentence that states it and
``judge_support`` checks the quote; or the cascade (the LM only inside the trained score's
uncertainty band). Either way the better of that verdict and the word-overlap one stands.
Before any of these, a claim naming the role a who-question asks ("the producer of …") is
unsupported when its strips do not state that role for the claim's answer
(``program.stages.relation``). The rule is ``decide_support``, which the citations
(``program.stages.attribution``) follow too, with no LM call. Verdicts: fully | partially | no.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import dspy

from program.guards.caps import report_cap
from program.judgments import SUPPORT, support
from program.judgments.support import evidence_sentences  # public here too
from program.question import entity_names, parsed
from program.judges.store import JudgeChoice, who_judges
from program.lm.configure import CRITIQUE_CONFIG
from program.lm.continuation import Reading, can_continue, continuing, continuing_reference
from program.stages.generation import cited_numbers
from program.stages.relation import states_role
from program.text import (clean_copy, content_words, coverage, has_negation, is_none, numbers, sentences,
                          spelled_as_digits, words)
from program.types import Claim, Strip
from signatures import CheckClaimSupport, ExtractClaims

RANKED_VERDICTS = ["no", "partially", "fully"]  # IsSup verdicts, worst first
VERDICT_VALUE = {"no": 0.0, "partially": 0.5, "fully": 1.0}  # the support judge's lexical feature
_STRIP_REFERENCE = re.compile(r",?\s*(?:as )?(?:mentioned|stated|according to|see)\s+(?:in\s+)?(?:strip|context)s?\b",
                              re.I)
# "not directly mentioned" too: an adverb between "not" and the verb
_DONT_KNOW = re.compile(r"\b(i don't know|i do not know|not (?:\w+ly )?"
                        r"(?:stated|mentioned|provided|specified|given|contain)"
                        r"|no information)\b", re.I)


def is_abstention(answer: str) -> bool:
    """True when the answer only says it does not know (such an answer has no claims)."""
    return not answer.strip() or bool(_DONT_KNOW.search(answer)) and len(answer.split()) < 25


def answer_words(claim: str, question: str) -> set[str]:
    """The claim's content words the question does not already hold: what the claim answers.

    ``("Maurice was a politician.", "What is John D. Maurice's occupation?")`` -> ``{"politician"}``.
    With no question, every content word of the claim."""
    return content_words(claim) - parsed(question).content_words


def judge_support(claim: str, quote: str, evidence: str, question: str = "") -> str:
    """Self-RAG's IsSup verdict from the evidence sentence the model quoted for the claim.

    Args:
        question: the question the claim answers; when given, the quote must also hold at
            least half of the claim's ``answer_words``. A short answer's one new word is its
            answer: "Maurice was a politician." against "John D. Maurice is an American
            journalist." holds half the claim's words, but not the answer.

    Returns:
        ``"no"`` when the quote is NONE, is not in the evidence (an invented quote: under 90 %
        of its content words there, or a number the evidence lacks),
        disagrees with the claim on a number or a negation, lacks a name the claim
        asserts (e.g. a different person) or the claim's answer; otherwise ``"fully"`` when
        the quote holds at least 75% of the claim's content words, ``"partially"`` at 40%,
        else ``"no"``. Spelled numbers count as their digits (``program.text.spelled_as_digits``).
    """
    quote = clean_copy(quote)
    if is_none(quote) or coverage(quote, evidence) < 0.9:
        return "no"
    # A quote whose numbers the evidence lacks is invented, however many words it shares: a check
    # continuing the reader's call can copy the answer ("365 days" where the strip says 180).
    if not numbers(spelled_as_digits(strip_citations(quote))) <= numbers(spelled_as_digits(evidence)):
        return "no"
    # "12 seconds" claims what "twelve seconds" says: from here on numbers are read in digits
    claim, quote = spelled_as_digits(strip_citations(claim)), spelled_as_digits(quote)
    if not numbers(claim) <= numbers(quote) or has_negation(claim) != has_negation(quote):
        return "no"
    # A name the evidence does not mention is not supported. A sentence's first word is
    # capitalised by grammar ("You can send up to $25,000 …"): it counts as a word, not a name.
    if not entity_names(claim) <= set(words(quote)):
        return "no"
    asserted = answer_words(claim, question) if question else set()
    if asserted and len(asserted & content_words(quote)) < len(asserted) / 2:
        return "no"
    covered = coverage(claim, quote)
    return "fully" if covered >= 0.75 else "partially" if covered >= 0.4 else "no"


def lexical_support(claim: str, evidence: str, question: str = "") -> str:
    """The best ``judge_support`` verdict any single evidence sentence gives the claim, with no
    LM call. A quote of one whole sentence cannot do better, so this is also the ceiling of what
    ``CheckClaimSupport`` adds unless it quotes across sentences."""
    verdicts = (judge_support(claim, sentence, evidence, question) for sentence in evidence_sentences(evidence))
    return max(verdicts, key=RANKED_VERDICTS.index, default="no")


def without_asked_entity(claim: str, question: str) -> str:
    """The claim with the question's own name words removed, when enough remains to check.

    The strips were already judged to be about the asked entity, and they often name it by
    surname or pronoun ("Hay was born in Eureka"): checking "William Perry Hay was born in
    Eureka, Illinois." word for word failed for want of "William Perry". What the check must
    verify is the asserted fact ("was born in Eureka, Illinois"). A claim left with fewer than
    two content words is checked whole.
    """
    asked = entity_names(question)
    kept = [w for w in claim.split() if words(w) == [] or words(w)[0] not in asked]
    rest = " ".join(kept)
    return rest if len(asked) and len(content_words(rest)) >= 2 and rest != claim else claim


def strip_citations(text: str) -> str:
    """The text without ``[n]`` citations and "as mentioned in strip" asides."""
    return _STRIP_REFERENCE.sub("", re.sub(r"\s*\[\d+\]", "", text)).strip()


class Support(NamedTuple):
    """One IsSup decision: ``verdict`` (``fully | partially | no``), the trained judge's ``score``
    in [0, 1] (None when it did not score) and the word-overlap verdict (``lexical``) it began from."""

    verdict: str
    score: float | None
    lexical: str


def decide_support(claim: str, evidence: str, question: str = "", judges=None, quote=None,
                   choice: JudgeChoice | None = None) -> Support:
    """Self-RAG's IsSup verdict (Asai et al. 2023 §3.1) for ``claim`` against ``evidence``: the one
    rule the self-check, the citations (``program.stages.attribution``) and the compile's judge
    choice (``optimize.judge_choice``) decide claim support by.

    In order, the first that decides:

    1. a who-question's role the evidence does not state for the claim's answer: ``no``
       (``program.stages.relation.states_role``);
    2. one evidence sentence that states the claim's words (``lexical_support``): ``fully``;
    3. the trained support judge (MiniCheck's check), when there is one and either no LM may be
       asked (``quote`` is None) or the compile's choice trusts it (``trained``, or ``cascade``
       outside its band): the better of its calibrated verdict and the word-overlap one;
    4. the LM (``CheckClaimSupport``): the better of the word-overlap verdict and
       ``judge_support`` of the sentence it quotes; an unparseable reply leaves the overlap one.

    Args:
        claim: the claim, with or without ``[n]`` markers; the question's own name words are
            left out of it (``without_asked_entity``).
        evidence: the text that may state it (a strip, or the cited strips joined).
        judges: a ``program.judges.JudgeSet``, or None (word overlap, then the LM).
        quote: ``quote(claim, evidence) -> str``, the LM's quote, raising on an unparseable
            reply; None when no LM call may be made (the citations make none).
        choice: who decides, in place of the compile's choice (``who_judges``): the compile
            measures each candidate by this rule.

    Returns:
        a ``Support``; its score is rounded to 4 decimals.
    """
    claim = strip_citations(claim)
    if not states_role(claim, evidence, question):  # "producer" where the strips say "directed by"
        return Support("no", None, "no")
    claim = without_asked_entity(claim, question)
    lexical = lexical_support(claim, evidence, question)
    if lexical == "fully":  # the cheap path: no judge, no LM call
        return Support(lexical, None, lexical)
    if quote is None:
        choice = JudgeChoice("trained")
    elif choice is None:
        choice = who_judges(judges, SUPPORT)
    score = None
    if judges is not None and judges.has(SUPPORT) and choice.trained:
        score = round(judges.score(SUPPORT, claim=claim, evidence=evidence, lexical_verdict=VERDICT_VALUE[lexical],
                                   question=question)[0], 4)
        if quote is None or not choice.asks_lm(score):
            return Support(max(lexical, support.verdict(judges, score), key=RANKED_VERDICTS.index), score, lexical)
    if quote is None:
        return Support(lexical, score, lexical)
    try:
        quoted = quote(claim, evidence)
    except Exception:  # unparseable: the word-overlap verdict stands
        return Support(lexical, score, lexical)
    return Support(max(lexical, judge_support(claim, quoted, evidence, question), key=RANKED_VERDICTS.index),
                   score, lexical)


class ClaimChecker(dspy.Module):
    """Extract the answer's claims and check each against its evidence.

    Args:
        extract_single_sentence: when False (default), a one-sentence answer is taken as its
            own single claim without an ``ExtractClaims`` call (the call would return it).
        judges: a ``program.judges.JudgeSet`` whose support judge scores claims, or None
            (the quote path only). ``Claim.score`` holds the trained score (-1.0 when none).

    ``forward(question, answer, strips) -> list[Claim]``. An abstention has no claims.
    A claim whose support call cannot be parsed is marked ``no`` (unsupported until shown).

    Example:
        >>> claims = ClaimChecker()(question=q, answer="Dune was written by Frank Herbert [1].", strips=strips)
        >>> [c.support for c in claims]
        ['fully']
    """

    def __init__(self, extract_single_sentence: bool = False, judges=None, max_claims: int = 8):
        super().__init__()
        self.judges = judges
        self.max_claims = max_claims  # the claims cap (program.guards.caps): the first ones are checked
        self.extract = dspy.Predict(ExtractClaims)
        self.support = dspy.Predict(CheckClaimSupport)
        self.extract_single_sentence = extract_single_sentence

    def forward(self, question: str, answer: str, strips: list[Strip], reading: Reading | None = None) -> list[Claim]:
        """The answer's claims, each with its support verdict. With ``reading`` (the reader's
        call that wrote the answer over ``strips``), every LM call continues it
        (``program.lm.continuation``) and names the cited strips instead of sending them again."""
        if is_abstention(answer):
            return []
        reading = reading if can_continue(reading) else None
        with continuing(reading):
            return self._claims(question, answer, strips, reading)

    def _claims(self, question: str, answer: str, strips: list[Strip], reading: Reading | None) -> list[Claim]:
        answer_sentences = sentences(answer)
        if len(answer_sentences) == 1 and not self.extract_single_sentence:
            texts = [answer.strip()]
        else:
            try:
                texts = [str(c) for c in self.extract(question=question, answer=answer, config=CRITIQUE_CONFIG).claims]
            except Exception:
                texts = answer_sentences
        texts = [t for t in texts if str(t).strip()]
        if len(texts) > self.max_claims:
            report_cap("claims", self.max_claims, f"checked the first {self.max_claims} of {len(texts)} claims")
            texts = texts[: self.max_claims]
        claims = []
        for text in texts:
            if not text.strip():
                continue
            # A claim cites what its sentence cites; an uncited claim is checked against everything.
            cited = cited_numbers(self._sentence_for(text, answer_sentences),
                                  len(strips)) or cited_numbers(text, len(strips))
            evidence = [strips[n - 1] for n in cited] or strips
            verdict, score = self._check(text, evidence, question, reading and cited)
            claims.append(Claim(text=strip_citations(text), support=verdict, cited=cited, score=score))
        return claims

    @staticmethod
    def _sentence_for(claim: str, sentences: list[str]) -> str:
        words = set(strip_citations(claim).lower().split())
        return max(sentences, key=lambda s: len(words & set(s.lower().split())), default="")

    def _check(self, claim: str, evidence: list[Strip], question: str = "",
               cited: list[int] | None = None) -> tuple[str, float]:
        """``(verdict, trained score or -1.0)`` for one claim against its evidence strips
        (``decide_support``, the LM asked when the judge choice says so). ``cited``: the strip
        numbers the evidence has in the reading a continued check names (None: it sends the
        evidence; ``[]``: every strip of the reading)."""
        if not evidence:
            return "no", -1.0
        quote = self._quote if cited is None else (lambda c, e: self._quote_cited(c, e, cited))
        decided = decide_support(claim, "\n".join(s.text for s in evidence), question, self.judges, quote)
        return decided.verdict, -1.0 if decided.score is None else decided.score

    def _quote(self, claim: str, evidence: str) -> str:
        """The evidence sentence ``CheckClaimSupport`` quotes for the claim (raises when unparseable)."""
        return self.support(claim=claim, evidence=evidence, config=CRITIQUE_CONFIG).quote

    def _quote_cited(self, claim: str, evidence: str, cited: list[int]) -> str:
        """``_quote`` inside a continued reading: the evidence is named, not sent again (a
        fallback adapter that formats the call afresh still receives it whole)."""
        with continuing_reference(evidence=cited_reference(cited)):
            return self.support(claim=claim, evidence=evidence, config=CRITIQUE_CONFIG).quote


def cited_reference(cited: list[int]) -> str:
    """What a continued check reads as its evidence: ``[2, 3]`` -> "the context strips [2] and [3]
    above"; ``[]`` -> "the context strips above"."""
    if not cited:
        return "the context strips above"
    marks = [f"[{n}]" for n in cited]
    named = marks[0] if len(marks) == 1 else ", ".join(marks[:-1]) + " and " + marks[-1]
    return f"the context {'strip' if len(marks) == 1 else 'strips'} {named} above"

