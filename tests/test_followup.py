"""A follow-up in a conversation is answered as its standalone question (``program.stages.followup``)."""

from __future__ import annotations

from program.stages.followup import TURN_CHARS, FollowUp, conversation_text
from signatures import StandaloneQuestion
from tests.conftest import FOUNDING, ListKnowledgeBase

HISTORY = [("user", "What does Acme Rockets build?"), ("assistant", "Acme Rockets builds small sounding rockets [1].")]


def test_a_follow_up_is_rewritten_and_the_result_keeps_both(fake_lm):
    from program.stages.crag import CRAG

    result = CRAG(ListKnowledgeBase([FOUNDING]), web=None)(question="Who founded it?", history=HISTORY)
    assert result.question == "Who founded Acme Rockets?" and result.asked == "Who founded it?"
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert [s.step for s in result.trace.steps][:2] == ["followup", "retrieve"]
    assert "follow-up 'Who founded it?' read as 'Who founded Acme Rockets?'" in result.trace.events


def test_a_question_without_an_earlier_user_turn_costs_no_call(fake_lm):
    from program.stages.crag import CRAG

    result = CRAG(ListKnowledgeBase([FOUNDING]), web=None)(question="Who founded Acme Rockets?",
                                       history=[("assistant", "Hello! Ask me about rockets.")])
    assert result.asked == "" and fake_lm.calls[StandaloneQuestion] == 0
    assert "followup" not in [s.step for s in result.trace.steps]


def test_a_broken_rewrite_leaves_the_users_words(fake_lm):
    fake_lm.rules[StandaloneQuestion] = lambda i: {"standalone_question": "x" * 5000}  # over the question limit
    assert FollowUp()(history=HISTORY, followup="Who founded it?") == "Who founded it?"
    fake_lm.rules[StandaloneQuestion] = lambda i: {"standalone_question": ""}
    assert FollowUp()(history=HISTORY, followup="Who founded it?") == "Who founded it?"


def test_only_the_last_turns_are_read_each_cut_short():
    history = [("user", f"question {n}") for n in range(10)] + [("assistant", "word " * 400)]
    text = conversation_text(history).splitlines()
    assert len(text) == 6 and text[0] == "user: question 5"
    assert text[-1].startswith("assistant: word word") and len(text[-1]) == len("assistant: ") + TURN_CHARS + 1
