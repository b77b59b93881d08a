"""Self-RAG's "retrieve or not" before CRAG (``CRAG(decide_retrieval=True)``) on the fake LM."""

from __future__ import annotations

import pytest

from program.stages.crag import CRAG
from program.types import Action
from signatures import AnswerClosedBook, DecideRetrieval
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase

QUESTION = "Who founded Acme Rockets?"
GREETING = "Hi there!"


def ask(question, **kwargs):
    kb, web = ListKnowledgeBase([FOUNDING]), FakeWeb([])
    return CRAG(kb, web=web, **kwargs)(question=question), kb, web


def test_a_greeting_skips_retrieval_and_answers_closed_book(fake_lm):
    fake_lm.rules[AnswerClosedBook] = lambda i: {"answer": "Hello! How can I help you today?"}
    result, kb, web = ask(GREETING, decide_retrieval=True)
    assert result.retrieval_skipped and result.answer == "Hello! How can I help you today?"
    assert kb.queries == [] and web.queries == []
    assert result.action is None and result.confidence == 0.0 and result.mode == "self-crag"
    assert result.grades == [] and result.strips == [] and result.claims == [] and result.citations == []
    assert not result.fallback
    assert [(s.step, s.lm_calls) for s in result.trace.steps] == [("decide-retrieval", 1), ("answer-closed-book", 1)]
    assert result.trace.lm_calls == 2 == sum(fake_lm.calls.values())
    assert dict(fake_lm.calls) == {"DecideRetrieval": 1, "AnswerClosedBook": 1}
    assert "decide-retrieval: no retrieval needed; answering closed-book" in result.trace.events
    d = result.to_dict()
    assert d["retrieval_skipped"] is True and d["action"] is None and d["trace"]["lm_calls"] == 2


def test_the_decision_runs_at_temperature_zero(fake_lm):
    ask(GREETING, decide_retrieval=True)
    decide_call = fake_lm.history[0]
    assert "Decide whether answering the question" in decide_call["messages"][0]["content"]
    assert decide_call["kwargs"]["temperature"] == 0.0


def test_a_factual_question_retrieves_as_before(fake_lm):
    plain, _, _ = ask(QUESTION)
    fake_lm.calls.clear()
    result, kb, _ = ask(QUESTION, decide_retrieval=True)
    assert not result.retrieval_skipped and kb.queries == [QUESTION]
    assert result.action is Action.CORRECT
    assert result.answer == plain.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert [s.step for s in result.trace.steps] == ["decide-retrieval"] + [s.step for s in plain.trace.steps]
    assert result.trace.lm_calls == plain.trace.lm_calls + 1
    # the decider's call, then the route's one call: the draft (passages are scored without the LM)
    assert dict(fake_lm.calls) == {"DecideRetrieval": 1, "GenerateAnswer": 1}


@pytest.mark.parametrize("said", ["no", "False", "false"])
def test_the_models_ways_of_saying_no_skip(fake_lm, said):
    fake_lm.rules[DecideRetrieval] = lambda i: {"needs_retrieval": said}
    result, kb, _ = ask(QUESTION, decide_retrieval=True)
    assert result.retrieval_skipped and kb.queries == [] and result.answer == "Acme Rockets was founded by Jane Roe."


@pytest.mark.parametrize("output", [{"needs_retrieval": "perhaps"}, {"verdict": "no"}])
def test_unparseable_decider_output_retrieves(fake_lm, output):
    fake_lm.rules[DecideRetrieval] = lambda i: output
    result, kb, _ = ask(GREETING, decide_retrieval=True)
    assert not result.retrieval_skipped and kb.queries == [GREETING]
    assert result.action is Action.CORRECT  # the route runs as usual: the draft over the one passage holds up
    assert fake_lm.calls["AnswerClosedBook"] == 0
    assert fake_lm.calls["DecideRetrieval"] == 2 == result.trace.steps[0].lm_calls  # DSPy's JSON fallback retries once
    assert any(e.startswith("decide-retrieval: unparseable output") for e in result.trace.events)
    assert result.trace.steps[0].step == "decide-retrieval" and result.trace.steps[1].step == "retrieve"


def test_option_off_makes_no_decider_call(fake_lm):
    result, kb, _ = ask(GREETING)
    program = CRAG(ListKnowledgeBase([FOUNDING]))
    assert not program.decide_retrieval and program.decider is None and program.closed_book is None
    assert fake_lm.calls["DecideRetrieval"] == 0 and fake_lm.calls["AnswerClosedBook"] == 0
    assert not result.retrieval_skipped and kb.queries == [GREETING]
    assert "decide-retrieval" not in [s.step for s in result.trace.steps]


def test_crag_mode_skips_too(fake_lm):
    result, kb, _ = ask("Thanks, that was really helpful!", decide_retrieval=True, self_check=False)
    assert result.retrieval_skipped and result.mode == "crag" and kb.queries == []


def test_a_compiled_program_without_the_decider_loads_with_it(tmp_path, fake_lm):
    from program.app.compiled import save_compiled
    from program.app.configuration import load_compiled

    program = CRAG(knowledge_base=None)
    program.generator.generate.signature = program.generator.generate.signature.with_instructions("Compiled.")
    save_compiled(program, {"lm": "fake", "thresholds": {"upper": 0.9, "lower": 0.5}}, tmp_path)
    loaded = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None,
                           decide_retrieval=True)
    assert loaded.decide_retrieval and (loaded.settings.upper, loaded.settings.lower) == (0.9, 0.5)
    assert loaded.generator.generate.signature.instructions == "Compiled."
    assert loaded.decider.signature.instructions == DecideRetrieval.instructions  # uncompiled, kept
    fake_lm.rules[AnswerClosedBook] = lambda i: {"answer": "Hello!"}
    assert loaded(question=GREETING).retrieval_skipped


def test_factory_applies_the_option_to_crag_modes_only(fake_lm, monkeypatch):
    from program.app.factory import build_program

    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    kb = ListKnowledgeBase([FOUNDING])
    for mode in ("crag", "self-crag"):
        program = build_program(mode, compiled_dir=None, knowledge_base=kb, web=None, decide_retrieval=True)
        assert program.decide_retrieval and program.mode == mode
    rag = build_program("rag", compiled_dir=None, knowledge_base=kb, web=None, decide_retrieval=True)
    result = rag(question=GREETING)
    assert kb.queries == [GREETING] and fake_lm.calls["DecideRetrieval"] == 0 and not result.retrieval_skipped
