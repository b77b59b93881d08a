"""The CRAG flow on a deterministic fake LM: the draft, the decision, the correction, the
self-check and the earned fallback."""

from __future__ import annotations

import pytest

from program.guards.question import QuestionError
from program.stages.crag import CRAG
from program.stages.draft import ConfidenceModel
from program.types import FALLBACK_ANSWER, Action
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase, generate

Q = "Who founded Acme Rockets?"
OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."
WEB_PAGE = ("https://en.wikipedia.org/wiki/Acme_Rockets",
            "Rockets are fun to watch on a clear night. " + FOUNDING + " The sky over the launch site is usually blue.")


def run(kb_texts, web_pages=(WEB_PAGE,), **kwargs):
    web = FakeWeb(list(web_pages))
    program = CRAG(ListKnowledgeBase(kb_texts), web=web, **kwargs)
    return program(question=Q), web


def test_a_draft_that_holds_up_is_the_answer_in_one_call(fake_lm):
    result, web = run([FOUNDING + " It builds small sounding rockets for university teams.", OFF_TOPIC])
    assert result.action is Action.CORRECT
    # one LM call: the draft; passages scored by retrieval similarity (no judge), no web
    assert sum(fake_lm.calls.values()) == 1 == fake_lm.calls["GenerateAnswer"]
    assert fake_lm.calls["GradeRetrieval"] == 0 and web.queries == []
    assert [(g.reason, g.score) for g in result.grades] == [("partial", 0.5), ("partial", 0.5)]
    # the passages read whole, as plain RAG reads them
    assert [s.source_id for s in result.strips] == ["doc0#0", "doc1#0"]
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert result.draft == "Acme Rockets was founded by Jane Roe [1]."
    assert result.draft_checks["support"] == 1.0 and result.draft_checks["premise"] == 1.0
    assert 0.5 <= result.confidence <= 1.0
    assert [(c.support, c.kept) for c in result.claims] == [("fully", True)]
    steps = [s.step for s in result.trace.steps]
    assert steps == ["retrieve", "evaluate", "draft", "decide", "self-check", "cite"]
    assert any(e.startswith("action=correct confidence=") and "the draft holds up" in e for e in result.trace.events)


def test_an_abstaining_draft_takes_the_correction_and_answers_from_the_web(fake_lm):
    result, web = run([OFF_TOPIC, "Bananas are yellow."])
    assert result.action is Action.INCORRECT and result.draft == "I don't know."
    assert web.queries == ["Acme Rockets founder"] and result.trace.rewritten_query == "Acme Rockets founder"
    # the web page was refined into strips: only the founding sentence is kept
    assert [(s.text, s.url) for s in result.strips] == [(FOUNDING, WEB_PAGE[0])]
    assert result.citations[0].url == WEB_PAGE[0] and "Jane Roe" in result.answer
    assert fake_lm.calls["GenerateAnswer"] == 2 and not result.fallback
    assert "the draft says the passages do not answer" in " ".join(result.trace.events)


def test_a_draft_whose_words_are_not_in_its_passage_is_incorrect(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: (
        {"answer": "Acme Rockets was founded by Elon Musk [1]."} if "Danube" in i["context"] else
        {"answer": "Acme Rockets was founded by Jane Roe [1]."})
    result, web = run([OFF_TOPIC])
    assert result.action is Action.INCORRECT
    assert result.draft == "Acme Rockets was founded by Elon Musk [1]."
    assert result.draft_checks["support"] == 0.0 and result.draft_checks["premise"] == 0.0
    assert "Jane Roe" in result.answer and not result.fallback


def test_ambiguous_adds_the_correction_to_the_draft_passages(fake_lm):
    import signatures

    # the draft's words stand in its passage, but it is too unsure to be the answer
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: (
        generate(i) if "founded by Jane Roe" in i["context"]
        else {"answer": "Acme Rockets builds rockets in Ohio [1]."})
    # a confidence that reads only how much of the question the cited passages hold
    coverage_only = ConfidenceModel(weights={"question_coverage": 10.0}, bias=-9.0)
    result, web = run(["Acme Rockets builds small rockets in Ohio."], confidence=coverage_only)
    assert result.action is Action.AMBIGUOUS
    assert web.queries == ["Acme Rockets founder"]
    assert [s.source_id for s in result.strips] == ["doc0#0", WEB_PAGE[0]]
    steps = [s.step for s in result.trace.steps]
    assert steps[:8] == ["retrieve", "evaluate", "draft", "decide", "rewrite", "re-retrieve", "web-search",
                         "evaluate-corrected"]


def test_the_operating_point_moves_the_action_and_the_decline(fake_lm):
    result, _ = run([FOUNDING], web_pages=(), accept=0.5)
    assert result.action is Action.CORRECT and not result.fallback
    result, _ = run([FOUNDING], web_pages=(), accept=0.999)
    # the correction found nothing new; the draft stays below accept: declined, with its confidence
    assert result.action is Action.AMBIGUOUS and result.fallback and result.answer == FALLBACK_ANSWER
    assert result.outcome.declined == "Acme Rockets was founded by Jane Roe [1]." and 0.5 < result.confidence < 0.999
    assert any(e.startswith("declined: confidence") for e in result.trace.events)


def test_accept_outside_0_1_is_refused(fake_lm):
    with pytest.raises(ValueError, match="accept must be in"):
        CRAG(ListKnowledgeBase([FOUNDING]), accept=1.5)


def test_unsupported_claim_is_retried_once_then_dropped(fake_lm):
    import signatures

    two_claims = {"answer": "Acme Rockets was founded by Jane Roe [1]. It is based on Mars [1]."}
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: two_claims
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: two_claims
    result, _ = run([FOUNDING])
    assert result.retried
    assert fake_lm.calls["GenerateStrictAnswer"] == 1  # capped at max_retries=1
    assert [(c.text, c.support, c.kept) for c in result.claims] == [
        ("Acme Rockets was founded by Jane Roe.", "fully", True),
        ("It is based on Mars.", "no", False),
    ]
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert not result.fallback


def test_stricter_retry_that_fixes_the_answer_keeps_it(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {
        "answer": "Acme Rockets was founded by Jane Roe and Elon Musk [1]."}
    result, _ = run([FOUNDING], accept=0.0)
    assert result.retried and result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert [c.support for c in result.claims] == ["fully"]


def test_fallback_when_no_claim_survives(fake_lm):
    import signatures

    # its words stand in the passage (so the draft holds up), but the year contradicts it
    wrong = {"answer": "Acme Rockets was founded by Jane Roe in 2005 [1]."}
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: wrong
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: wrong
    result, _ = run([FOUNDING], accept=0.0)
    assert result.action is Action.CORRECT and result.retried
    assert result.fallback and result.answer == FALLBACK_ANSWER
    assert result.citations == []
    assert result.trace.events[-1] == "declined: no claim of the answer stands in its sources; honest fallback"
    assert result.outcome.reason == "no claim of the answer stands in its sources"


def test_a_confident_draft_whose_words_its_passage_lacks_does_not_hold_up(fake_lm):
    import signatures

    # the bug: with no token probabilities a draft naming someone the passage never mentions
    # scored at the operating point and was the answer; its own words are not in its source
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Acme Rockets was founded by Elon Musk [1]."}
    result, web = run([FOUNDING], web_pages=(), accept=0.0, self_check=False)
    assert result.action is Action.INCORRECT and result.fallback and result.answer == FALLBACK_ANSWER
    assert result.outcome.declined == "Acme Rockets was founded by Elon Musk [1]."
    assert result.draft_checks["support"] == 0.0
    assert any("but" in e and "its own words are not in the cited passages (support 0.00)" in e
               for e in result.trace.events)
    assert result.trace.events[-1] == "declined: support 0.00: its own words are not in its passage; honest fallback"
    assert result.outcome.reason == "support 0.00: its own words are not in its passage"


def test_fallback_when_web_fails_and_nothing_internal(fake_lm):
    web = FakeWeb([], error=TimeoutError("read timed out"))
    result = CRAG(ListKnowledgeBase([OFF_TOPIC]), web=web)(question=Q)
    assert result.action is Action.INCORRECT and result.fallback
    assert result.answer == FALLBACK_ANSWER and result.confidence == 0.0
    assert "web path failed: fake-web: read timed out" in result.trace.events
    assert fake_lm.calls["GenerateAnswer"] == 1  # the draft; the correction found nothing to write from


def test_trace_counts_calls_and_tokens_per_step(fake_lm):
    result, _ = run([FOUNDING, OFF_TOPIC])
    per_step = {s.step: s.lm_calls for s in result.trace.steps}
    # the claim's words are all in its passage, so support needs no LM call
    assert per_step == {"retrieve": 0, "evaluate": 0, "draft": 1, "decide": 0, "self-check": 0, "cite": 0}
    assert result.trace.lm_calls == 1 == sum(fake_lm.calls.values())
    assert result.trace.prompt_tokens > 0 and result.trace.completion_tokens > 0
    assert result.to_dict()["trace"]["lm_calls"] == 1


def test_trace_counts_calls_when_the_lm_history_is_full(fake_lm):
    # at max_history_size DSPy drops the oldest entry per call: the length no longer grows
    import dspy

    with dspy.context(max_history_size=3):
        run([OFF_TOPIC])
        fake_lm.calls.clear()
        result, _ = run([OFF_TOPIC])
    assert len(fake_lm.history) == 3
    assert {s.step: s.lm_calls for s in result.trace.steps}["draft"] == 1
    # draft, rewrite, a strip grade per web sentence, the answer from the web
    assert result.trace.lm_calls == sum(fake_lm.calls.values()) == 6


def test_crag_mode_without_self_check_keeps_the_answer_as_generated(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Acme Rockets was founded by Jane Roe in 2005 [1]."}
    result, _ = run([FOUNDING], self_check=False, accept=0.0)
    assert result.mode == "crag" and result.action is Action.CORRECT
    # no claim check, so the sentence stays; its marker does not: the strip says 1999
    assert result.answer == "Acme Rockets was founded by Jane Roe in 2005."
    assert result.claims == [] and not result.retried and not result.fallback
    assert [(s.supported, s.by) for s in result.sentences] == [(False, "none")] and result.citations == []
    assert fake_lm.calls["CheckClaimSupport"] == 0 and fake_lm.calls["GenerateStrictAnswer"] == 0


@pytest.mark.parametrize("question", ["", "   ", "x" * 2001])
def test_bad_questions_raise_a_clear_error(fake_lm, question):
    with pytest.raises(QuestionError):
        CRAG(ListKnowledgeBase([FOUNDING]))(question=question)


def test_web_pages_are_refined_strip_by_strip(fake_lm):
    page = ("https://example.org/acme", FOUNDING + " Jane Roe also founded Roe Labs in 2005. "
            "The sky is blue over the launch site today.")
    result, _ = run([OFF_TOPIC], web_pages=(page,))
    assert fake_lm.calls["StripRelevance"] == 3
    assert [s.text for s in result.strips] == [FOUNDING, "Jane Roe also founded Roe Labs in 2005."]
    assert next(s.notes for s in result.trace.steps if s.step == "refine-corrected") == \
        "scored 3 of 3 strips (3 by the LM), kept 2 at threshold 0.5"


class MentioningKnowledgeBase(ListKnowledgeBase):
    """A list-backed knowledge base that also says which names its passages write."""

    def mentions(self, terms):
        from program.retrieval.mentions import mentioned_in, word_set

        return mentioned_in(word_set(p.text for p in self.passages), terms)


LOOK_ALIKE = "Zenith Rockets was founded by Jane Roe in 1999. It builds small sounding rockets."


def test_a_question_naming_what_the_knowledge_base_never_writes_is_declined_in_one_call(fake_lm):
    # the bug: the draft "Acme Rockets was founded by Jane Roe" read well (its words stand in
    # the Zenith passage) and was given, though the documents never name Acme
    program = CRAG(MentioningKnowledgeBase([LOOK_ALIKE, OFF_TOPIC]), web=None, accept=0.0)
    result = program(question=Q)
    assert result.draft == "Acme Rockets was founded by Jane Roe [1]."
    assert result.draft_checks["unmentioned"] == ("acme",) and result.draft_checks["support"] == 1.0
    assert result.action is Action.INCORRECT and result.fallback and result.answer == FALLBACK_ANSWER
    assert result.outcome.declined == result.draft and result.confidence == 0.0
    assert result.outcome.reason == "the knowledge base never mentions 'acme'"
    assert sum(fake_lm.calls.values()) == 1  # no rewrite: the same documents cannot name Acme
    assert "the knowledge base never mentions 'acme'" in " ".join(result.trace.events)


def test_a_name_the_knowledge_base_never_writes_is_looked_up_on_the_web(fake_lm):
    web = FakeWeb([WEB_PAGE])
    result = CRAG(MentioningKnowledgeBase([LOOK_ALIKE, OFF_TOPIC]), web=web, accept=0.0)(question=Q)
    assert result.action is Action.INCORRECT and web.queries == ["Acme Rockets founder"]
    assert not result.fallback and "Jane Roe" in result.answer
    assert result.citations[0].url == WEB_PAGE[0]  # the web page writes "Acme": it holds up


FEE = "The monthly plan fee is 5 dollars. It is billed on the first day of each month."


@pytest.mark.parametrize("question, condition", [
    ("What will the monthly plan fee be in 2075?", "2075"),
    ("What will the monthly plan fee be several decades from now?", "several decades from now"),
    ("How much will the monthly plan fee be in 40 years?", "40 years from now")])
def test_a_time_the_documents_do_not_cover_is_declined_not_answered_as_today(question, condition, fake_lm):
    """Outside tester: a fee decades from now got today's fee, action correct, no hedge. The time
    a question is set at is a premise, as a name is: documents that never write it do not answer."""
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "The monthly plan fee is 5 dollars [1]."}
    result = CRAG(MentioningKnowledgeBase([FEE, OFF_TOPIC]), web=None, accept=0.0)(question=question)
    assert result.draft == "The monthly plan fee is 5 dollars [1]."
    assert result.draft_checks["unmentioned"] == (condition,)
    assert result.fallback and result.answer == FALLBACK_ANSWER and result.confidence == 0.0
    assert result.outcome.reason == f"the knowledge base never mentions {condition!r}"
    # the same question about today, or about a time the documents write, is answered
    for asked in ("What is the monthly plan fee?", "What was the monthly plan fee in 2075?"):
        text = FEE + (" From 2075 the fee is 9 dollars." if "2075" in asked else "")
        fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "The monthly plan fee is 5 dollars [1]."}
        answered = CRAG(MentioningKnowledgeBase([text, OFF_TOPIC]), web=None, accept=0.0)(question=asked)
        assert not answered.fallback and answered.draft_checks["unmentioned"] == ()


def test_a_knowledge_base_that_names_what_is_asked_is_not_gated(fake_lm):
    result = CRAG(MentioningKnowledgeBase([FOUNDING, OFF_TOPIC]), web=None)(question=Q)
    assert result.action is Action.CORRECT and result.draft_checks["unmentioned"] == ()


def test_crag_checks_the_claims_of_an_answer_near_its_operating_point(fake_lm):
    import signatures

    # its words are in its passage, so the draft holds up; its year is not the strip's
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Acme Rockets was founded by Jane Roe in 2005 [1]."}
    fake_lm.rules[signatures.CheckClaimSupport] = lambda i: {"quote": "NONE"}
    result, _ = run([FOUNDING], web_pages=(), self_check=False, accept=0.0, verify_band=1.0)
    assert result.mode == "crag" and result.action is Action.CORRECT
    assert result.fallback and result.answer == FALLBACK_ANSWER and not result.retried
    assert [(c.text, c.support, c.kept) for c in result.claims] == [
        ("Acme Rockets was founded by Jane Roe in 2005.", "no", False)]
    assert result.outcome.declined == "Acme Rockets was founded by Jane Roe in 2005 [1]."
    assert result.outcome.reason == "no claim of the answer stands in its sources"
    verify = next(s for s in result.trace.steps if s.step == "verify")
    assert verify.notes.endswith("accept 0.00 + band 1.00: 0 of 1 claim(s) supported")
    assert fake_lm.calls["GenerateStrictAnswer"] == 0  # no retry: that is self-crag's


def test_crag_gives_an_answer_well_above_its_operating_point_unchecked(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Acme Rockets was founded by Jane Roe in 2005 [1]."}
    result, _ = run([FOUNDING], web_pages=(), self_check=False, accept=0.0, verify_band=0.0)
    assert (not result.fallback and result.answer == "Acme Rockets was founded by Jane Roe in 2005."
            and result.claims == [])
    assert "verify" not in [s.step for s in result.trace.steps]
    assert fake_lm.calls["CheckClaimSupport"] == 0


def test_crag_keeps_the_supported_claims_of_an_answer_it_checks(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {
        "answer": "Acme Rockets was founded by Jane Roe in 1999 [1]. It sells rockets to NASA [1]."}
    fake_lm.rules[signatures.ExtractClaims] = lambda i: {
        "claims": ["Acme Rockets was founded by Jane Roe in 1999 [1].", "It sells rockets to NASA [1]."]}
    fake_lm.rules[signatures.CheckClaimSupport] = lambda i: {"quote": "NONE"}
    result, _ = run([FOUNDING], web_pages=(), self_check=False, accept=0.0, verify_band=1.0)
    assert not result.fallback and result.answer.startswith("Acme Rockets was founded by Jane Roe in 1999")
    assert "NASA" not in result.answer
    assert [(c.support, c.kept) for c in result.claims] == [("fully", True), ("no", False)]


@pytest.mark.parametrize("band", [-0.1, 1.5])
def test_a_verify_band_outside_0_1_is_refused(band):
    with pytest.raises(ValueError, match=r"verify_band must be in \[0, 1\], got"):
        CRAG(ListKnowledgeBase([FOUNDING]), verify_band=band)
