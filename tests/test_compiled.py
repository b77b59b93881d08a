"""Saving and loading the compiled program: prompts, demos and thresholds survive the round trip."""

from __future__ import annotations

import json

import dspy
import pytest

from program.app.compiled import has_compiled, load_compiled, read_manifest, save_compiled
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, ListKnowledgeBase


def test_round_trip_keeps_demos_and_thresholds(tmp_path, fake_lm):
    program = CRAG(knowledge_base=None)
    demo = dspy.Example(question="Who wrote Dune?", passage="Dune is a novel by Frank Herbert.",
                        same_entity=True, answers_question=True, outdated=False)
    program.evaluator.grade.demos = [demo]
    save_compiled(program, {"lm": "fake", "thresholds": {"upper": 0.9, "lower": 0.5}}, tmp_path)
    assert has_compiled(tmp_path) and read_manifest(tmp_path)["lm"] == "fake"
    assert not list(tmp_path.glob("*.tmp*"))  # written under a temporary name, then renamed

    loaded = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert (loaded.upper, loaded.lower) == (0.9, 0.5)
    assert loaded.evaluator.grade.demos[0]["passage"] == "Dune is a novel by Frank Herbert."
    assert loaded(question="Who founded Acme Rockets?").answer.startswith("Acme Rockets was founded by Jane Roe")


def test_loading_from_an_empty_folder_says_how_to_compile(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m optimize.compile"):
        load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([]), web=None, embedder=None)


def test_a_failed_save_leaves_the_previous_compiled_program(tmp_path, monkeypatch):
    program = CRAG(knowledge_base=None)
    save_compiled(program, {"lm": "first"}, tmp_path)
    before = (tmp_path / "crag.json").read_text()

    def broken_save(path, **kwargs):
        with open(path, "w") as fh:
            fh.write('{"half": ')  # a crash half way through writing
        raise OSError("disk full")

    monkeypatch.setattr(program, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_compiled(program, {"lm": "second"}, tmp_path)
    assert (tmp_path / "crag.json").read_text() == before
    assert json.loads((tmp_path / "manifest.json").read_text())["lm"] == "first"


def test_a_state_compiled_for_another_signature_is_not_loaded_into_the_new_one(tmp_path, fake_lm):
    # the failing input: compiled/ saved for the batched StripRelevance (question, strips ->
    # answer_spans) loaded into the per-strip one poured its instructions into the new fields
    program = CRAG(knowledge_base=None)
    program.evaluator.grade.demos = [dspy.Example(question="q", passage="p", same_entity=True,
                                                  answers_question=True, outdated=False)]
    save_compiled(program, {"lm": "fake", "thresholds": {"upper": 0.9, "lower": 0.5}}, tmp_path)
    state = json.loads((tmp_path / "crag.json").read_text())
    state["refiner.grade"]["signature"] = {
        "instructions": "Copy from the numbered knowledge strips the words that answer the question.",
        "fields": [{"prefix": "Question:", "description": "${question}"},
                   {"prefix": "Strips:", "description": "numbered knowledge strips"},
                   {"prefix": "Answer Spans:", "description": "one line per answering strip"}]}
    (tmp_path / "crag.json").write_text(json.dumps(state))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    del manifest["state_sha256"]  # an old compile's manifest, saved before the state's sha256 was recorded
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="refiner.grade was compiled for another signature"):
        loaded = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert loaded.refiner.grade.signature.instructions.startswith("Copy from the knowledge strip the words")
    assert list(loaded.refiner.grade.signature.output_fields) == ["answer_span"]
    assert len(loaded.evaluator.grade.demos) == 1  # the other predictors still load
    assert loaded(question="Who founded Acme Rockets?").answer.startswith("Acme Rockets was founded by Jane Roe")
