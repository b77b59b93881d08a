"""The reader's words as they are written: the answer field's text, without DSPy's markers, from
the real embedded model's stream (``program.lm.words``)."""

from __future__ import annotations

import dspy
import pytest

from program.lm.words import FieldText, reading, words_to


def _fed(pieces: list[str]) -> list[str]:
    out: list[str] = []
    field = FieldText(out.append)
    for piece in pieces:
        field.feed(piece)
    return out


def test_only_the_answer_fields_text_passes_markers_held_back():
    pieces = ["[[ ## ans", "wer ## ]]\n", "Acme Rockets", " was founded by", " Jane Roe [", "1].", "\n\n[",
              "[ ## completed ## ]]"]
    out = _fed(pieces)
    assert "".join(out) == "Acme Rockets was founded by Jane Roe [1]."
    assert out[0] == "Acme Rockets" and "[" not in out[2]  # "[" waited for its "1]"


def test_nothing_passes_without_the_answer_marker():
    assert _fed(["[[ ## reasoning ## ]]\n", "think", "\n\n[[ ## completed ## ]]"]) == []


@pytest.mark.slow
@pytest.mark.real_model
def test_the_embedded_model_streams_the_draft_it_writes():
    from program.lm.configure import build_lm
    from program.stages.crag import CRAG
    from tests.conftest import FOUNDING, ListKnowledgeBase

    lm = build_lm("embedded-0.5b")
    lm.cache = False
    pieces: list[str] = []
    with dspy.context(lm=lm), words_to(pieces.append):
        result = CRAG(ListKnowledgeBase([FOUNDING]), web=None, self_check=False)(question="Who founded Acme Rockets?")
    assert len(pieces) > 3 and "".join(pieces).strip() == result.draft.strip()
    # a judge's or the claims' call is not streamed: only the reader's (reading())
    with dspy.context(lm=lm), words_to(pieces.append):
        pieces.clear()
        lm("Say hi.")
    assert pieces == []
    with dspy.context(lm=lm), words_to(pieces.append), reading():
        lm("Say hi.")  # no answer field: nothing passes
    assert pieces == []


def test_the_recorder_names_the_words_of_the_draft_and_of_a_later_answer(fake_lm):
    from program.app.tracing import StepRecorder
    from program.stages.generation import AnswerGenerator
    from program.types import Strip

    events: list[dict] = []
    recorder = StepRecorder(events.append)
    recorder.words("Acme")
    with dspy.context(callbacks=[recorder]):  # the draft's answer event, written by the fake LM
        AnswerGenerator()(question="Who founded Acme Rockets?",
                          strips=[Strip(source_id="a#0", position=0, text="Acme Rockets was founded by Jane Roe.")])
    recorder.words("Jane")
    words = [(e["stage"], e["text"]) for e in events if e["event"] == "words"]
    assert words == [("draft", "Acme"), ("corrected", "Jane")]


def test_a_served_models_draft_is_streamed_by_dspy_in_the_services_worker_thread(monkeypatch):
    """In an AnyIO worker thread (the service's) the reader's call to a served model streams, and
    the sink gets the answer field's words; the draft, its token probability and the verdict are
    those of the call made whole. Outside one, with a sink all the same, the call is made whole."""
    import anyio

    from program.lm.configure import build_lm
    from program.stages.crag import CRAG
    from tests.conftest import FOUNDING, ListKnowledgeBase
    from tests.served_fake_lm import start

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    server = start(logprobs=True)
    try:
        lm = build_lm("openai/fake", api_base=server.base)
        lm.cache = False

        def ask(pieces: list[str]):
            with dspy.context(lm=lm), words_to(pieces.append):
                return CRAG(ListKnowledgeBase([FOUNDING]), web=None, self_check=False)(
                    question="Who founded Acme Rockets?")

        streamed_pieces: list[str] = []
        streamed = anyio.run(lambda: anyio.to_thread.run_sync(ask, streamed_pieces))
        assert server.streamed == 1
        whole_pieces: list[str] = []
        whole = ask(whole_pieces)
        assert server.streamed == 1 and whole_pieces == []
    finally:
        server.stop()
    assert streamed_pieces == ["Acme", " Rockets", " was", " founded", " by", " Jane", " Roe", " [1]."]
    assert streamed.draft == whole.draft == "Acme Rockets was founded by Jane Roe [1]."
    draft_notes = [s.notes for r in (streamed, whole) for s in r.trace.steps if s.step == "draft"]
    assert "token_probability=0.90" in draft_notes[0] and draft_notes[0] == draft_notes[1]
    assert streamed.confidence == whole.confidence and streamed.action == whole.action
