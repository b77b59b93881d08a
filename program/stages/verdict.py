"""The final verdict of one question, decided in one place (CRAG §4.3, Self-RAG §3.1).

The route's steps return values: the draft and its action (``program.stages.decision``), the
correction's second answer (``Corrected``), the claim check (``Checked``). :func:`verdict` is a
pure function of them and the settings; it returns the one ``Verdict`` the result is built from,
so the action, the answer shown, the decline and the reason cannot disagree:

    the answer   the higher-confidence of the draft and the corrected answer (``chosen``)
    declined     (``Ending.DECLINED``) when that answer does not hold up (``holds_up``: it abstains, its confidence is
                 below ``accept``, its own words are not in its passage, or the question names what
                 the sources never write), or when the claim check keeps no claim of it
    answered     otherwise (``Ending.DRAFT`` or ``Ending.CORRECTED``): the answer, or the stricter
                 retry the claim check kept (``Outcome.strict``), without the claims the check
                 found unsupported

``action`` is the route CRAG took, apart from how it ended (``outcome``): CORRECT (the draft went
straight to the answer), INCORRECT or AMBIGUOUS (the correction ran, or was skipped for the
reason in ``Corrected.skipped``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from program.stages.decision import Decision, holds_up, unmentioned_reason
from program.stages.draft import Draft
from program.stages.settings import CRAGSettings
from program.stages.attribution import Attribution
from program.types import (FALLBACK_ANSWER, Action, ChunkGrade, Claim, Correction, CRAGResult, Ending, Outcome, Strip,
                           Trace)

VERIFY, SELF_CHECK = "verify", "self-check"  # the claim checks: crag's near the operating point, self-crag's


@dataclass(frozen=True)
class Corrected:
    """What CRAG's correction gave (§4.3).

    Attributes:
        correction: the strips and grades it found (empty when it did not run).
        answer: the answer written again from them; None when nothing was found or it did not run.
        skipped: why it did not run although the action asked for it ("" when it ran).
    """

    correction: Correction = field(default_factory=Correction)
    answer: Draft | None = None
    skipped: str = ""


@dataclass(frozen=True)
class Checked:
    """The claim check of the chosen answer (Self-RAG's IsSup and IsUse, §3.1).

    Attributes:
        kind: ``VERIFY`` (crag, near the operating point) or ``SELF_CHECK`` (self-crag).
        answer: the answer whose claims were checked: the chosen answer, or the stricter retry
            when the check kept it.
        claims: its claims with their IsSup verdicts (``kept`` not yet set).
        retried: True when the stricter regeneration ran (kept or not).
        retry_kept: True when ``answer`` is the retry's.
        usefulness: IsUse in [0, 1]; -1.0 when not judged.
    """

    kind: str
    answer: str
    claims: list[Claim]
    retried: bool = False
    retry_kept: bool = False
    usefulness: float = -1.0


@dataclass(frozen=True)
class Verdict:
    """The outcome of one question: what ``CRAGResult`` shows.

    Attributes:
        action: the route taken (see the module's docstring).
        outcome: how it ended (``program.types.Outcome``): answered by the draft or the
            corrected answer (or the stricter retry of it), or declined with its reason.
        answer: the answer to cite, with its ``[n]`` markers; ``FALLBACK_ANSWER`` when declined.
        confidence: the chosen answer's confidence in [0, 1] (for a decline, of the answer held back).
        strips: the context the chosen answer was written from (its ``[n]`` are these).
        claims: the checked claims, ``kept`` set; empty when no claim check ran.
        retried: the stricter regeneration ran.
        usefulness: IsUse of the checked answer; -1.0 when not judged.
    """

    action: Action
    outcome: Outcome
    answer: str
    confidence: float
    strips: list[Strip]
    claims: list[Claim] = field(default_factory=list)
    retried: bool = False
    usefulness: float = -1.0

    @property
    def fallback(self) -> bool:
        """True when the question was declined with the honest fallback."""
        return self.outcome.fallback

    def note(self) -> str:
        """The trace's last event: ``declined: <reason>; honest fallback`` or ``answered by <who>: <reason>``."""
        return self.outcome.summary() + ("; honest fallback" if self.fallback else "")

    def result(self, question: str, draft: Draft, grades: list[ChunkGrade], corrected: Corrected | None,
               cited: Attribution | None, trace: Trace, mode: str) -> CRAGResult:
        """The ``CRAGResult`` of this verdict: the cited answer (``cited``, None when declined)
        beside the draft, the grades and the correction's grades."""
        return CRAGResult(
            question=question, answer=cited.answer if cited else self.answer, action=self.action,
            outcome=self.outcome, confidence=self.confidence, draft=draft.answer,
            draft_checks=asdict(draft.evidence), citations=cited.citations if cited else [],
            sentences=cited.sentences if cited else [], grades=grades, strips=self.strips, claims=self.claims,
            retried=self.retried, usefulness=self.usefulness, trace=trace, mode=mode,
            corrected_grades=corrected.correction.grades if corrected else [])


def chosen(draft: Draft, corrected: Corrected | None) -> Draft:
    """The answer CRAG keeps: the corrected answer when its confidence is higher, else the draft."""
    again = corrected.answer if corrected is not None else None
    return again if again is not None and again.confidence > draft.confidence else draft


def claim_check(answer: Draft, settings: CRAGSettings) -> str | None:
    """Which claim check ``answer`` gets: ``SELF_CHECK`` (self-crag, every answer), ``VERIFY``
    (crag, an answer below ``accept + verify_band``) or None (declined before any check, or
    confident enough)."""
    if not holds_up(answer.evidence, answer.confidence, settings.accept):
        return None
    if settings.self_check:
        return SELF_CHECK
    return VERIFY if answer.confidence < settings.accept + settings.verify_band else None


def decline_reason(answer: Draft, accept: float) -> str:
    """Why an answer that does not hold up is declined, one phrase."""
    if answer.abstained:
        return "no answer was written"
    if answer.evidence.unmentioned:
        return unmentioned_reason(answer.evidence.unmentioned)
    if answer.confidence < accept:
        return f"confidence {answer.confidence:.2f} < accept {accept:.2f}"
    return f"support {answer.evidence.support:.2f}: its own words are not in its passage"


def verdict(draft: Draft, decision: Decision, corrected: Corrected | None, checked: Checked | None,
            settings: CRAGSettings) -> Verdict:
    """The final verdict from the route's values; no LM call, no side effect.

    Args:
        draft: the reader's first answer.
        decision: the action decided on it (``program.stages.decision.decide``).
        corrected: the correction's outcome; None when the action was CORRECT.
        checked: the claim check of ``chosen(draft, corrected)``; None when ``claim_check`` said none.
        settings: ``accept`` and ``verify_band`` are read.

    Raises:
        ValueError: ``checked`` is given where ``claim_check`` says no check runs, or missing where
            it says one does (the route and the verdict would disagree).
    """
    best = chosen(draft, corrected)
    by = Ending.DRAFT if best is draft else Ending.CORRECTED
    expected = claim_check(best, settings)
    if (checked.kind if checked else None) != expected:
        raise ValueError(f"claim check {checked.kind if checked else None!r} where the route runs {expected!r}")

    def ended(ending: Ending, reason: str, answer: str = FALLBACK_ANSWER, declined: str = "", strict: bool = False,
              **checks) -> Verdict:
        return Verdict(decision.action, Outcome(ending, reason, declined, strict), answer, best.confidence,
                       best.strips, **checks)

    if not holds_up(best.evidence, best.confidence, settings.accept):
        return ended(Ending.DECLINED, decline_reason(best, settings.accept), declined=best.answer)
    held = (f"the {'draft' if by is Ending.DRAFT else 'corrected answer'} holds up: confidence "
            f"{best.confidence:.2f} >= accept {settings.accept:.2f}"
            + (f" (the draft's {draft.confidence:.2f})" if by is Ending.CORRECTED else ""))
    if checked is None:
        return ended(by, held, answer=best.answer)
    claims = [replace(c, kept=c.support != "no") for c in checked.claims]
    kept = [c for c in claims if c.kept]
    checks = {"claims": claims, "retried": checked.retried, "usefulness": checked.usefulness}
    if not kept:
        return ended(Ending.DECLINED, "no claim of the answer stands in its sources", declined=checked.answer, **checks)
    retry = "; the stricter retry held up at least as well" if checked.retry_kept else ""
    answer, reason = checked.answer, f"{held}{retry}; {len(kept)} of {len(claims)} claim(s) supported"
    if len(kept) < len(claims):
        answer = " ".join(c.text + "".join(f" [{n}]" for n in c.cited) for c in kept)
        reason += f", {len(claims) - len(kept)} dropped"
    return ended(by, reason, answer=answer, strict=checked.retry_kept, **checks)
