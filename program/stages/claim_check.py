"""The claim check of the answer CRAG keeps: Self-RAG's IsSup and IsUse (Asai et al. 2023, §3.1).

Which check an answer gets is the verdict's (``program.stages.verdict.claim_check``): crag's
``verify`` of an answer near the operating point, its claims against the strips they cite, no
retry; self-crag's ``self-check`` of every answer, with the capped stricter regeneration for
unsupported claims and IsUse. Each check continues the reader's call
(``program.lm.continuation``), so the prompt cache serves the strips the answer was written from.
"""

from __future__ import annotations

from dataclasses import replace

import dspy

from program.guards.cost import step
from program.lm.continuation import Reading, continuing
from program.stages.draft import Draft
from program.stages.events import emit
from program.stages.generation import AnswerGenerator
from program.stages.reader import UNREADABLE_OUTPUT
from program.stages.selfcheck import ClaimChecker, is_abstention, strip_citations
from program.stages.settings import CRAGSettings
from program.stages.usefulness import UsefulnessJudge
from program.stages.verdict import SELF_CHECK, VERIFY, Checked, claim_check
from program.types import Claim, Strip, Trace


class ClaimCheck(dspy.Module):
    """``forward(question, answer: Draft, trace) -> Checked | None`` (None: no check runs).

    Args:
        checker: the ``ClaimChecker`` (claims and their IsSup verdicts).
        generator: the reader, for the stricter retry.
        usefulness: the IsUse judge.
        settings: ``accept``, ``verify_band``, ``self_check``, ``max_retries`` and ``lower`` are read.

    Each check emits a ``claims`` event (``retry`` true for the stricter retry's).
    """

    def __init__(self, checker: ClaimChecker, generator: AnswerGenerator, usefulness: UsefulnessJudge,
                 settings: CRAGSettings):
        super().__init__()
        self.checker = checker
        self.generator = generator
        self.usefulness = usefulness
        self.settings = settings

    def forward(self, question: str, answer: Draft, trace: Trace) -> Checked | None:
        kind = claim_check(answer, self.settings)
        if kind == VERIFY:
            return self.verify(question, answer, trace)
        return self.self_check(question, answer, trace) if kind == SELF_CHECK else None

    def claims(self, question: str, answer: str, strips: list[Strip], reading: Reading | None,
               retry: bool = False) -> list[Claim]:
        """The answer's claims with their IsSup verdicts, and their ``claims`` event."""
        claims = self.checker(question=question, answer=answer, strips=strips, reading=reading)
        emit("claims", claims=claims, retry=retry)
        return claims

    def verify(self, question: str, answer: Draft, trace: Trace) -> Checked:
        """crag's check of an answer near the operating point: IsSup over its claims against
        the strips they cite. No retry: that and IsUse are self-crag's."""
        settings = self.settings
        with step(trace, VERIFY) as cost:
            claims = self.claims(question, answer.answer, answer.strips, answer.reading)
            cost.notes = (f"confidence {answer.confidence:.2f} < accept {settings.accept:.2f} + band "
                          f"{settings.verify_band:.2f}: {sum(c.support != 'no' for c in claims)} of {len(claims)} "
                          "claim(s) supported")
        return Checked(VERIFY, answer.answer, claims)

    def self_check(self, question: str, chosen: Draft, trace: Trace) -> Checked:
        """IsSup over the chosen answer's claims against the same evidence, the capped stricter
        retry for unsupported ones, and IsUse."""
        answer, strips, reading = chosen.answer, chosen.strips, chosen.reading
        with step(trace, SELF_CHECK):
            checked = Checked(SELF_CHECK, answer, self.claims(question, answer, strips, reading))
        retries = self.settings.max_retries
        for _ in range(self.settings.max_retries):
            unsupported = [c.text for c in checked.claims if c.support == "no"]
            if not unsupported:
                break
            trace.note(f"{len(unsupported)} unsupported claim(s): stricter retry")
            checked = self.retry(question, strips, unsupported, checked, trace, reading)
            retries -= 1
        # IsUse: an answer that does not address the question gets the same capped retry
        threshold = self.usefulness.threshold(self.settings.lower)
        if self.usefulness.judges is not None:
            with step(trace, "usefulness") as cost, continuing(reading):
                checked = replace(checked, usefulness=self.usefulness(question=question, answer=checked.answer))
                cost.notes = f"usefulness={checked.usefulness} (threshold {threshold})"
        if 0 <= checked.usefulness < threshold and retries > 0 and not is_abstention(checked.answer):
            trace.note(f"usefulness {checked.usefulness} below {threshold}: stricter retry")
            checked = self.retry(question, strips, [f"{strip_citations(checked.answer)} (does not answer the "
                                                    "question)"], checked, trace, reading)
        return checked

    def retry(self, question: str, strips: list[Strip], unsupported: list[str], checked: Checked,
              trace: Trace, reading: Reading | None = None) -> Checked:
        """The capped stricter regeneration and its self-check.

        The retry replaces the checked answer only when its claims hold up at least as well
        (``support_rank``); Self-RAG keeps the output its critique ranks best (§3.3), and a
        stricter prompt on a 1.5B model often writes a worse answer than the first."""
        checked = replace(checked, retried=True)
        with step(trace, "generate-strict"), continuing(reading, context="the numbered context strips above"):
            try:
                retried = self.generator(question=question, strips=strips, unsupported=unsupported)
            except UNREADABLE_OUTPUT as exc:
                trace.note(f"generate-strict: unparseable output ({type(exc).__name__}); the first answer stands")
                return checked
        with step(trace, "self-check-retry"):
            retried_claims = self.claims(question, retried, strips, reading, retry=True)
        if support_rank(retried_claims) < support_rank(checked.claims):
            trace.note(f"the stricter retry held up less ({support_rank(retried_claims)} < "
                       f"{support_rank(checked.claims)}): the first answer stands")
            return checked
        return replace(checked, answer=retried, claims=retried_claims, retry_kept=True)


def support_rank(claims: list[Claim]) -> tuple[int, float]:
    """How well an answer's claims held up: ``(kept claims, share of claims kept)``, each kept
    claim being ``partially`` or ``fully`` supported (Self-RAG's IsSup). An abstention, with
    no claims, ranks ``(0, 0.0)``."""
    kept = sum(c.support != "no" for c in claims)
    return kept, round(kept / len(claims), 4) if claims else 0.0
