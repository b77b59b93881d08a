"""The final verdict of one question, decided in one place (CRAG §4.3, Self-RAG §3.1).

The route's steps return values: the draft and its action (``program.stages.decision``), the
correction's second answer (``Corrected``), the claim check (``Checked``). :func:`verdict` is a
pure function of them and the settings; it returns the one ``Verdict`` the result is built from,
so the action, the answer shown, the decline and the reason cannot disagree:

    the answer   the higher-confidence of the draft and the corrected answer (``chosen``)
    declined     when that answer does not hold up (``holds_up``: it abstains, its confidence is
                 below ``accept``, its own words are not in its passage, or the question names what
                 the sources never write), or when the claim check keeps no claim of it
    answered     otherwise: the answer, or the stricter retry the claim check kept, without the
                 claims the check found unsupported

``action`` is the route CRAG took: CORRECT (the draft went straight to the answer), INCORRECT or
AMBIGUOUS (the correction ran, or was skipped for the reason in ``Corrected.skipped``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from program.stages.decision import Decision, holds_up, unmentioned_reason
from program.stages.draft import Draft
from program.stages.settings import CRAGSettings
from program.types import FALLBACK_ANSWER, Action, Claim, Correction, Strip

DRAFT, CORRECTED, RETRY = "draft", "corrected answer", "stricter retry"  # what ``Verdict.answered_by`` names
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
        answer: the answer to cite, with its ``[n]`` markers; ``FALLBACK_ANSWER`` when declined.
        answered_by: ``DRAFT``, ``CORRECTED`` or ``RETRY``; "" when declined.
        confidence: the chosen answer's confidence in [0, 1] (for a decline, of the answer held back).
        strips: the context the chosen answer was written from (its ``[n]`` are these).
        reason: one phrase saying why this answer or why the decline.
        declined: the answer held back ("" when answered, or when nothing was written).
        claims: the checked claims, ``kept`` set; empty when no claim check ran.
        retried: the stricter regeneration ran.
        usefulness: IsUse of the checked answer; -1.0 when not judged.
    """

    action: Action
    answer: str
    answered_by: str
    confidence: float
    strips: list[Strip]
    reason: str
    declined: str = ""
    claims: list[Claim] = field(default_factory=list)
    retried: bool = False
    usefulness: float = -1.0

    @property
    def fallback(self) -> bool:
        """True when the question was declined with the honest fallback."""
        return not self.answered_by

    def note(self) -> str:
        """The trace's last event: ``declined: <reason>; honest fallback`` or ``answered by <who>: <reason>``."""
        if self.fallback:
            return f"declined: {self.reason}; honest fallback"
        return f"answered by the {self.answered_by}: {self.reason}"


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
    by = DRAFT if best is draft else CORRECTED
    base = Verdict(decision.action, FALLBACK_ANSWER, "", best.confidence, best.strips, "")
    expected = claim_check(best, settings)
    if (checked.kind if checked else None) != expected:
        raise ValueError(f"claim check {checked.kind if checked else None!r} where the route runs {expected!r}")
    if not holds_up(best.evidence, best.confidence, settings.accept):
        return replace(base, declined=best.answer, reason=decline_reason(best, settings.accept))
    held = (f"the {by} holds up: confidence {best.confidence:.2f} >= accept {settings.accept:.2f}"
            + (f" (the draft's {draft.confidence:.2f})" if by == CORRECTED else ""))
    if checked is None:
        return replace(base, answer=best.answer, answered_by=by, reason=held)
    claims = [replace(c, kept=c.support != "no") for c in checked.claims]
    kept = [c for c in claims if c.kept]
    answered = replace(base, claims=claims, retried=checked.retried, usefulness=checked.usefulness)
    if not kept:
        return replace(answered, declined=checked.answer, reason="no claim of the answer stands in its sources")
    retry = "; the stricter retry held up at least as well" if checked.retry_kept else ""
    answer, reason = checked.answer, f"{held}{retry}; {len(kept)} of {len(claims)} claim(s) supported"
    if len(kept) < len(claims):
        answer = " ".join(c.text + "".join(f" [{n}]" for n in c.cited) for c in kept)
        reason += f", {len(claims) - len(kept)} dropped"
    return replace(answered, answer=answer, answered_by=RETRY if checked.retry_kept else by, reason=reason)
