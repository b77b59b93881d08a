"""A boolean field's probability, and a text field's,
from the LM's token log probabilities (program.lm.token_scores)."""

from __future__ import annotations

import math

import pytest

from program.lm.configure import _token_logprobs
from program.lm.token_scores import field_probability, field_text_probability, field_token_logprobs


def _entry(token: str, alternatives: dict[str, float] | None = None) -> dict:
    top = [{"token": t, "logprob": math.log(p)} for t, p in (alternatives or {}).items()]
    return {"token": token, "logprob": top[0]["logprob"] if top else 0.0, "top_logprobs": top}


def _chat_reply(answers: dict[str, float]) -> dict:
    """``[[ ## same_entity ## ]]\\nTrue\\n\\n[[ ## answers_question ## ]]\\n...`` as tokens."""
    tokens = [_entry("[[ ## same"), _entry("_entity ## ]]"), _entry("\n"), _entry("True", {"True": 0.9, "False": 0.1}),
              _entry("\n\n"), _entry("[[ ## answers"), _entry("_question ## ]]"), _entry("\n"),
              _entry("False", answers), _entry("\n\n"), _entry("[[ ## completed ## ]]")]
    return {"content": tokens}


def test_probability_of_true_is_normalised_over_true_and_false_alternatives():
    reply = _chat_reply({"False": 0.6, "True": 0.2, "Yes": 0.1, "The": 0.1})
    assert field_probability(reply, "answers_question") == pytest.approx(0.3 / 0.9)
    assert field_probability(reply, "same_entity") == pytest.approx(0.9)


def test_json_layout_with_lower_case_tokens():
    tokens = [_entry('{"'), _entry("answers"), _entry('_question'), _entry('":'),
              _entry(" true", {" true": 0.7, " false": 0.2, ' "': 0.1}), _entry("}")]
    assert field_probability({"content": tokens}, "answers_question") == pytest.approx(0.7 / 0.9)


def test_chosen_token_without_alternatives_is_certain():
    tokens = [_entry("outdated"), _entry(":"), _entry(" False")]
    assert field_probability({"content": tokens}, "outdated") == 0.0


@pytest.mark.parametrize("logprobs", [None, {}, {"content": []},
                                      {"content": [_entry("answers_question"), _entry(": maybe")]},
                                      {"content": [_entry("same_entity"), _entry(": True")]}])
def test_missing_field_or_value_gives_none(logprobs):
    assert field_probability(logprobs, "answers_question") is None


def test_llama_cpp_logprobs_become_lm15_token_logprobs():
    raw = {"content": [{"id": 1, "token": "True", "bytes": [84], "logprob": -0.1,
                        "top_logprobs": [{"id": 1, "token": "True", "logprob": -0.1},
                                         {"id": 2, "token": "False", "logprob": -2.4}]}]}
    (token,) = _token_logprobs(raw)
    assert (token.token, token.logprob) == ("True", -0.1)
    assert [(t.token, t.logprob) for t in token.top] == [("True", -0.1), ("False", -2.4)]
    assert _token_logprobs(None) is None


def test_log_probabilities_are_asked_only_of_lms_that_give_them():
    import dspy

    from program.lm.configure import LlamaCppEngine, supports_logprobs
    from tests.fake_lm import FakeLM

    assert LlamaCppEngine.logprobs is True and supports_logprobs(FakeLM({}))
    assert supports_logprobs(dspy.LM("openai/gpt-4o-mini")) and supports_logprobs(dspy.LM("hosted_vllm/qwen"))
    assert not supports_logprobs(dspy.LM("anthropic/claude-sonnet")) and not supports_logprobs(
        dspy.LM("ollama_chat/qwen"))


def _tokens(*pairs) -> dict:
    return {"content": [{"token": t, "logprob": lp} for t, lp in pairs]}


def test_a_text_field_s_probability_counts_the_words_after_its_marker():
    """The draft's token probability (a feature of its confidence): the geometric mean of the answer's
    word tokens, the field marker split over several tokens as a tokenizer splits it."""
    reply = _tokens(("[[", 0.0), (" ##", 0.0), (" answer", -3.0), (" ##", 0.0), (" ]]", 0.0), ("\n", 0.0),
                    ("Jane", -0.1), (" Roe", -0.3), ("\n\n", 0.0), ("[[", 0.0), (" ## completed ## ]]", 0.0))
    assert field_text_probability(reply, "answer") == pytest.approx(math.exp(-0.2), abs=1e-4)


def test_a_field_marker_sent_as_one_token_still_gives_the_answer_s_probability():
    reply = _tokens(("[[ ## answer ## ]]", 0.0), ("\n", 0.0), ("Jane", -0.1), (" Roe", -0.3), ("\n\n", 0.0),
                    ("[[ ## completed ## ]]", 0.0))
    assert field_text_probability(reply, "answer") == pytest.approx(math.exp(-0.2), abs=1e-4)


def test_the_field_name_s_token_is_not_an_answer_word():
    reply = _tokens(("[[ ##", 0.0), (" answer ## ]]", -2.0), ("\n", 0.0), ("Jane", -0.1), (" Roe", -0.3),
                    ("\n\n", 0.0), ("[[ ## completed ## ]]", 0.0))
    assert field_text_probability(reply, "answer") == pytest.approx(math.exp(-0.2), abs=1e-4)


def test_the_answer_s_token_log_probabilities_are_its_words_in_order():
    reply = _tokens(("[[ ## answer ## ]]", 0.0), ("\n", 0.0), ("Jane", -0.1), (" [1]", -0.5), (" Roe", -0.3),
                    ("\n\n", 0.0), ("[[ ## completed ## ]]", 0.0))
    assert field_token_logprobs(reply, "answer") == [-0.1, -0.3]
    assert field_token_logprobs(reply, "question") == []
    assert field_token_logprobs(None, "answer") == []
