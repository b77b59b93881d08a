"""Checks continue the reader's conversation (program/lm/continuation.py): the prompt the claim
check sends begins with the reader's, token for token, so the LM's prompt cache serves what the
draft read; the cited strips are named, not sent again; cached tokens are counted per step."""

from __future__ import annotations

import dspy
import pandas as pd
import pytest

import signatures
from optimize.report import _step_medians
from program.lm.continuation import ContinuingChatAdapter, Reading, continuing, recorded_reading
from program.lm.configure import build_lm, cached_tokens
from program.stages.crag import CRAG
from program.stages.selfcheck import cited_reference
from tests.conftest import FOUNDING, ListKnowledgeBase
from tests.served_fake_lm import start

Q = "Who founded Acme Rockets?"
TWO_CLAIMS = {"answer": "Acme Rockets was founded by Jane Roe [1]. It is based on Mars [1]."}
READER_TURN = '[[ ## question ## ]]\nWho?\n\n[[ ## context ## ]]\n["[1] Jane Roe."]'
READING = Reading(({"role": "system", "content": "Answer from the strips."}, {"role": "user", "content": READER_TURN}),
                  "[[ ## answer ## ]]\nJane Roe [1].\n\n[[ ## completed ## ]]")


def test_a_continued_call_is_the_readers_messages_its_reply_and_one_turn():
    adapter = ContinuingChatAdapter(READING, {"evidence": cited_reference([1])})
    messages = adapter.format(signatures.CheckClaimSupport, [], {"claim": "Jane Roe founded it.",
                                                                 "evidence": "Jane Roe founded Acme Rockets."})
    assert messages[:3] == [*READING.messages, {"role": "assistant", "content": READING.reply}]
    assert len(messages) == 4 and messages[3]["role"] == "user"
    turn = messages[3]["content"]
    assert turn.startswith(signatures.CheckClaimSupport.instructions)
    assert "[[ ## claim ## ]]\nJane Roe founded it." in turn
    assert "[[ ## evidence ## ]]\nthe context strip [1] above" in turn  # named, not sent again
    assert "Jane Roe founded Acme Rockets." not in turn
    assert "`[[ ## quote ## ]]`" in turn  # the output asked for, as ChatAdapter asks


@pytest.mark.parametrize("cited, expected", [
    ([2], "the context strip [2] above"),
    ([2, 3], "the context strips [2] and [3] above"),
    ([1, 2, 4], "the context strips [1], [2] and [4] above"),
    ([], "the context strips above"),
])
def test_cited_strips_are_named_as_the_reader_numbered_them(cited, expected):
    assert cited_reference(cited) == expected


def test_without_a_reading_or_the_programs_adapter_nothing_changes():
    with dspy.context(adapter=None), continuing(READING):
        assert dspy.settings.adapter is None
    with continuing(None):
        assert dspy.settings.adapter is None


class Sent:
    """Wraps a FakeLM to keep each call's (system, last user turn, earlier user turns)."""

    def __init__(self, lm):
        self.calls: list[tuple[str, str, list[str]]] = []
        reply = lm.reply

        def recording(system, user, earlier=()):
            self.calls.append((system, user, list(earlier)))
            return reply(system, user, earlier)

        lm.reply = recording

    def of(self, signature) -> list[tuple[str, str, list[str]]]:
        first = signature.instructions.splitlines()[0]
        return [c for c in self.calls if c[1].startswith(first) or (first in c[0] and not c[2])]


def test_the_claim_check_continues_the_draft_and_names_its_strip(fake_lm):
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: TWO_CLAIMS
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: TWO_CLAIMS
    sent = Sent(fake_lm)
    result = CRAG(ListKnowledgeBase([FOUNDING]))(question=Q)
    (draft_system, draft_user, _), = sent.of(signatures.GenerateAnswer)
    checks = sent.of(signatures.CheckClaimSupport)
    assert len(checks) == 2  # "based on Mars": the first answer's and the stricter retry's
    for system, user, earlier in checks:
        assert system == draft_system and earlier == [draft_user]  # the draft's prompt, then the check's turn
        assert "[[ ## evidence ## ]]\nthe context strip [1] above" in user and FOUNDING not in user
    assert [(c.text, c.support) for c in result.claims] == [("Acme Rockets was founded by Jane Roe.", "fully"),
                                                             ("It is based on Mars.", "no")]


def test_continue_reading_off_sends_the_evidence_in_a_prompt_of_its_own(fake_lm):
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: TWO_CLAIMS
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: TWO_CLAIMS
    sent = Sent(fake_lm)
    result = CRAG(ListKnowledgeBase([FOUNDING]), continue_reading=False)(question=Q)
    checks = sent.of(signatures.CheckClaimSupport)
    assert checks and all(not earlier and FOUNDING in user for _, user, earlier in checks)
    assert [c.support for c in result.claims] == ["fully", "no"]


def test_a_recorded_reading_is_the_last_call_and_its_reply(fake_lm):
    with recorded_reading() as record, continuing(None):
        with dspy.context(adapter=ContinuingChatAdapter(READING)):  # a continuation records nothing
            dspy.Predict(signatures.JudgeUsefulness)(question=Q, answer="Jane Roe.")
    assert record.reading is None and record.calls == 0


def test_llama_cpps_cached_prompt_tokens_are_read_from_its_usage():
    usage = {"prompt_tokens": 210, "prompt_tokens_details": {"cached_tokens": 189}}  # as xllamacpp returns it
    assert cached_tokens(usage) == 189
    assert cached_tokens({"prompt_tokens": 170}) == 0 and cached_tokens({}) == 0


def test_step_medians_count_what_the_cache_served():
    steps = pd.DataFrame({"id": ["a", "b", "c"], "lm_calls": [1, 1, 0], "prompt_tokens": [1000, 1200, 0],
                          "cached_tokens": [900, 1000, 0], "seconds": [4.0, 6.0, 0.1]})
    assert _step_medians(steps) == {"median_seconds": 4.0, "median_prompt_tokens": 1100,
                                    "median_cached_tokens": 950, "median_read_tokens": 150}


@pytest.mark.slow  # a loopback server
def test_a_served_models_check_prompt_begins_with_the_drafts_and_its_cache_is_counted(fake_lm, monkeypatch):
    """vLLM and SGLang cache prefixes: the check's request holds the draft's messages and reply first."""
    fake_lm.rules[signatures.GenerateAnswer] = lambda i: TWO_CLAIMS
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: TWO_CLAIMS
    server = start(rules=fake_lm.rules)
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        lm = build_lm("openai/fake", api_base=server.base)
        lm.cache = False
        with dspy.context(lm=lm):
            result = CRAG(ListKnowledgeBase([FOUNDING]), web=None)(question=Q)
    finally:
        server.stop()
    draft = server.prompts[0]  # its messages and its reply
    first = signatures.CheckClaimSupport.instructions.splitlines()[0]
    checks = [p for p in server.prompts if p[-2]["content"].startswith(first)]
    assert checks and all(p[:len(draft)] == draft for p in checks)
    steps = {s.step: s for s in result.trace.steps}
    assert steps["draft"].cached_tokens == 0
    assert steps["self-check"].cached_tokens >= len(" ".join(m["content"] for m in draft).split()) - 5
    assert 0 < result.trace.cached_tokens <= result.trace.prompt_tokens


def test_the_compile_asks_a_support_row_as_the_program_asks_it(fake_lm):
    """A support row (claim, evidence) is asked continuing the reader's call it stands for."""
    from optimize.continued import ROW_QUESTION, ContinuedCheck, reading_for

    reading = reading_for("Jane Roe founded it.", FOUNDING)
    assert reading.messages[0]["role"] == "system" and ROW_QUESTION in reading.messages[-1]["content"]
    assert FOUNDING in reading.messages[-1]["content"] and "Jane Roe founded it. [1]" in reading.reply
    sent = Sent(fake_lm)
    pred = ContinuedCheck(dspy.Predict(signatures.CheckClaimSupport))(claim="It was founded in 1999.",
                                                                      evidence=FOUNDING)
    (_, user, earlier), = sent.calls
    assert earlier and "the context strip [1] above" in user and FOUNDING not in user
    assert pred.quote == FOUNDING  # the fake read strip [1] of the reading, as a model would


def test_a_quote_of_the_answer_with_a_number_the_evidence_lacks_supports_nothing():
    """support-023: continuing the reader's call, the check copied the answer (365 days) instead of
    the strip (180 days); the copy shares all but one word with the strip."""
    from program.stages.selfcheck import judge_support

    evidence = ("You can refund a payment for up to 180 days after the original charge. After 180 days the "
                "Refund button is disabled and you need to pay the customer back another way, for example by "
                "bank transfer.")
    claim = "You can refund a payment up to 365 days after the original charge."
    assert judge_support(claim, "You can refund a payment up to 365 days after the original charge. [1]",
                         evidence) == "no"
    assert judge_support("You can refund a payment for up to 180 days.",
                         "You can refund a payment for up to 180 days after the original charge.", evidence) == "fully"
