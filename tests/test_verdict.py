"""One verdict: every route of ``CRAG.forward`` ends in one ``Verdict``, and the result's action,
answer, decline, reason and trace agree (``program.stages.verdict``)."""

from __future__ import annotations

import pytest

from program.guards.caps import QuestionCaps
from program.stages.crag import CRAG
from program.stages.decision import Decision
from program.stages.draft import ConfidenceModel, Draft, DraftEvidence
from program.stages.selfcheck import strip_citations
from program.stages.settings import CRAGSettings
from program.stages.verdict import SELF_CHECK, VERIFY, Checked, Corrected, chosen, claim_check, verdict
from program.types import FALLBACK_ANSWER, Action, Claim, Ending, Strip
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase, generate
from tests.test_crag import LOOK_ALIKE, OFF_TOPIC, Q, WEB_PAGE, MentioningKnowledgeBase

ELON = {"answer": "Acme Rockets was founded by Elon Musk [1]."}
YEAR_2005 = {"answer": "Acme Rockets was founded by Jane Roe in 2005 [1]."}
TWO_CLAIMS = {"answer": "Acme Rockets was founded by Jane Roe [1]. It is based on Mars [1]."}


def _rules(fake_lm, **answers):
    import signatures

    for name, rule in answers.items():
        fake_lm.rules[getattr(signatures, name)] = rule if callable(rule) else (lambda i, r=rule: r)


def _ask(kb, web=None, **settings):
    return CRAG(kb, web=web, **settings)(question=Q)


def correct_unchecked(fake_lm):
    return _ask(ListKnowledgeBase([FOUNDING, OFF_TOPIC]), self_check=False, verify_band=0.0)


def correct_self_checked(fake_lm):
    return _ask(ListKnowledgeBase([FOUNDING, OFF_TOPIC]))


def correct_verified_then_declined(fake_lm):
    _rules(fake_lm, GenerateAnswer=YEAR_2005, CheckClaimSupport={"quote": "NONE"})
    return _ask(ListKnowledgeBase([FOUNDING]), self_check=False, accept=0.0, verify_band=1.0)


def correct_verified_claim_dropped(fake_lm):
    _rules(fake_lm, GenerateAnswer={"answer": "Acme Rockets was founded by Jane Roe in 1999 [1]. "
                                              "It sells rockets to NASA [1]."},
           ExtractClaims={"claims": ["Acme Rockets was founded by Jane Roe in 1999 [1].",
                                     "It sells rockets to NASA [1]."]},
           CheckClaimSupport={"quote": "NONE"})
    return _ask(ListKnowledgeBase([FOUNDING]), self_check=False, accept=0.0, verify_band=1.0)


def incorrect_corrected_from_the_web(fake_lm):
    return _ask(ListKnowledgeBase([OFF_TOPIC, "Bananas are yellow."]), web=FakeWeb([WEB_PAGE]))


def incorrect_nothing_found(fake_lm):
    return _ask(ListKnowledgeBase([OFF_TOPIC]), web=FakeWeb([], error=TimeoutError("read timed out")))


def incorrect_support_declined(fake_lm):
    _rules(fake_lm, GenerateAnswer=ELON)
    return _ask(ListKnowledgeBase([FOUNDING]), web=FakeWeb([]), accept=0.0, self_check=False)


def incorrect_unmentioned_no_web(fake_lm):
    return _ask(MentioningKnowledgeBase([LOOK_ALIKE, OFF_TOPIC]), accept=0.0)


def ambiguous_corrected(fake_lm):
    _rules(fake_lm, GenerateAnswer=lambda i: generate(i) if "founded by Jane Roe" in i["context"]
           else {"answer": "Acme Rockets builds rockets in Ohio [1]."})
    coverage_only = ConfidenceModel(weights={"question_coverage": 10.0}, bias=-9.0)
    return _ask(ListKnowledgeBase(["Acme Rockets builds small rockets in Ohio."]), web=FakeWeb([WEB_PAGE]),
                confidence=coverage_only)


def ambiguous_below_accept(fake_lm):
    return _ask(ListKnowledgeBase([FOUNDING]), web=FakeWeb([]), accept=0.999)


def self_check_retry_kept(fake_lm):
    _rules(fake_lm, GenerateAnswer={"answer": "Acme Rockets was founded by Jane Roe and Elon Musk [1]."})
    return _ask(ListKnowledgeBase([FOUNDING]), accept=0.0)


def self_check_retry_then_claim_dropped(fake_lm):
    _rules(fake_lm, GenerateAnswer=TWO_CLAIMS, GenerateStrictAnswer=TWO_CLAIMS)
    return _ask(ListKnowledgeBase([FOUNDING]))


def self_check_retry_then_declined(fake_lm):
    _rules(fake_lm, GenerateAnswer=YEAR_2005, GenerateStrictAnswer=YEAR_2005)
    return _ask(ListKnowledgeBase([FOUNDING]), accept=0.0)


def cap_reached(fake_lm):
    # the draft is the one LM call allowed; the correction's rewrite would be the second
    return _ask(ListKnowledgeBase([OFF_TOPIC]), web=FakeWeb([WEB_PAGE]), caps=QuestionCaps(lm_calls=1))


NO_CLAIM = "no claim of the answer stands in its sources"
# route -> (action, how it ended, the stricter retry's answer shown, the reason's beginning)
ROUTES = {
    correct_unchecked: (Action.CORRECT, Ending.DRAFT, False, "the draft holds up: confidence"),
    correct_self_checked: (Action.CORRECT, Ending.DRAFT, False, "the draft holds up"),
    correct_verified_then_declined: (Action.CORRECT, Ending.DECLINED, False, NO_CLAIM),
    correct_verified_claim_dropped: (Action.CORRECT, Ending.DRAFT, False, "the draft holds up"),
    incorrect_corrected_from_the_web: (Action.INCORRECT, Ending.CORRECTED, False, "the corrected answer holds up"),
    incorrect_nothing_found: (Action.INCORRECT, Ending.DECLINED, False, "no answer was written"),
    incorrect_support_declined: (Action.INCORRECT, Ending.DECLINED, False,
                                 "support 0.00: its own words are not in its passage"),
    incorrect_unmentioned_no_web: (Action.INCORRECT, Ending.DECLINED, False,
                                   "the knowledge base never mentions 'acme'"),
    ambiguous_corrected: (Action.AMBIGUOUS, Ending.CORRECTED, False, "the corrected answer holds up"),
    ambiguous_below_accept: (Action.AMBIGUOUS, Ending.DECLINED, False, "confidence 0."),
    self_check_retry_kept: (Action.CORRECT, Ending.DRAFT, True, "the draft holds up"),
    self_check_retry_then_claim_dropped: (Action.CORRECT, Ending.DRAFT, True, "the draft holds up"),
    self_check_retry_then_declined: (Action.CORRECT, Ending.DECLINED, False, NO_CLAIM),
    cap_reached: (None, Ending.STOPPED, False, "stopped: lm_calls cap of 1 reached"),
}


def assert_agrees(result) -> None:
    """The result's action, answer, outcome and trace tell one story."""
    steps, events = [s.step for s in result.trace.steps], result.trace.events
    outcome = result.outcome
    answered = outcome.ending in (Ending.DRAFT, Ending.CORRECTED)
    assert result.fallback == (result.answer == FALLBACK_ANSWER) == (not answered)
    assert outcome.reason
    if result.fallback:
        assert result.citations == [] and result.sentences == [] and "cite" not in steps
        assert events[-1] in (f"declined: {outcome.reason}; honest fallback", f"{outcome.reason}; honest fallback")
    else:
        assert outcome.declined == ""
        assert events[-1] == outcome.summary()
        assert events[-1].startswith("answered by the stricter retry of the " if outcome.strict else "answered by the ")
        assert steps[-1] == "cite" and result.citations
    if result.action is not None:
        assert any(e.startswith(f"action={result.action.value} ") for e in events)
    corrected = "rewrite" in steps or any(e.endswith("no correction") for e in events)
    assert corrected == (result.action in (Action.INCORRECT, Action.AMBIGUOUS))
    if outcome.ending is Ending.CORRECTED:
        assert "generate" in steps and "kept the corrected answer" in " ".join(events)
    if outcome.strict:
        assert result.retried and "generate-strict" in steps
    assert bool(result.claims) <= bool({"verify", "self-check"} & set(steps))
    kept = [c for c in result.claims if c.kept]
    for claim in result.claims:
        assert claim.kept == (claim.support != "no")
        if not result.fallback:
            assert (strip_citations(claim.text) in strip_citations(result.answer)) == claim.kept
    if outcome.ending is Ending.DRAFT and not outcome.strict and len(kept) == len(result.claims):
        assert strip_citations(result.answer) == strip_citations(result.draft)


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: r.__name__)
def test_every_route_ends_in_one_verdict_its_result_and_trace_agree_on(fake_lm, route):
    result = route(fake_lm)
    action, ending, strict, reason = ROUTES[route]
    assert (result.action, result.outcome.ending, result.outcome.strict) == (action, ending, strict)
    assert result.outcome.reason.startswith(reason), result.outcome.reason
    assert_agrees(result)


def test_a_claim_dropped_is_named_in_the_reason(fake_lm):
    result = correct_verified_claim_dropped(fake_lm)
    assert result.outcome.reason.endswith("; 1 of 2 claim(s) supported, 1 dropped")
    assert result.answer.startswith("Acme Rockets was founded by Jane Roe in 1999") and "NASA" not in result.answer


def _draft(answer="Jane Roe founded it [1].", confidence=0.8, **checks) -> Draft:
    evidence = DraftEvidence(**{"support": 1.0, "premise": 1.0, **checks})
    return Draft(answer, [Strip("doc0#0", 0, FOUNDING)], evidence, confidence)


def test_the_corrected_answer_is_kept_only_when_more_confident():
    draft = _draft(confidence=0.4)
    assert chosen(draft, Corrected(answer=_draft(confidence=0.4))) is draft  # a tie keeps the draft
    again = _draft(confidence=0.6)
    assert chosen(draft, Corrected(answer=again)) is again
    assert chosen(draft, Corrected(skipped="no web")) is draft and chosen(draft, None) is draft


def test_which_claim_check_runs_depends_on_the_mode_and_the_band():
    settings = CRAGSettings(accept=0.5, verify_band=0.2, self_check=False)
    assert claim_check(_draft(confidence=0.6), settings) == VERIFY
    assert claim_check(_draft(confidence=0.7), settings) is None
    assert claim_check(_draft(confidence=0.4), settings) is None  # declined: no check
    assert claim_check(_draft(confidence=0.9), CRAGSettings(accept=0.5)) == SELF_CHECK


def test_a_check_the_route_would_not_run_is_refused():
    decision = Decision(Action.CORRECT, 0.9)
    settings = CRAGSettings(accept=0.5, verify_band=0.0, self_check=False)
    with pytest.raises(ValueError, match="claim check 'verify' where the route runs None"):
        verdict(_draft(confidence=0.9), decision, None, Checked(VERIFY, "x", []), settings)
    with pytest.raises(ValueError, match="claim check None where the route runs 'self-check'"):
        verdict(_draft(confidence=0.9), decision, None, None, CRAGSettings(accept=0.5))


def test_the_verdict_leaves_the_checked_claims_as_they_were():
    claims = [Claim("Jane Roe founded it.", "fully", [1]), Claim("It is on Mars.", "no", [1])]
    out = verdict(_draft(), Decision(Action.CORRECT, 0.8), None, Checked(SELF_CHECK, "x", claims),
                  CRAGSettings(accept=0.5))
    assert [c.kept for c in out.claims] == [True, False] and [c.kept for c in claims] == [True, True]
    assert out.answer == "Jane Roe founded it. [1]" and out.outcome.ending is Ending.DRAFT
