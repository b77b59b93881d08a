"""Saving and loading the compiled program: prompts, demos, thresholds and the
confidence model survive the round trip."""

from __future__ import annotations

import json

import dspy
import pytest

from program.app.compiled import has_compiled, read_manifest, save_compiled

from program.app.configuration import load_compiled
from program.guards.caps import QuestionCaps
from program.judges import save_judges
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase
from tests.test_judges import toy_judges


def test_round_trip_keeps_demos_and_thresholds(tmp_path, fake_lm):
    program = CRAG(knowledge_base=None)
    demo = dspy.Example(question="Who wrote Dune?", passage="Dune is a novel by Frank Herbert.",
                        same_entity=True, answers_question=True, outdated=False)
    program.evaluator.grade.demos = [demo]
    save_compiled(program, {"lm": "fake", "thresholds": {"upper": 0.9, "lower": 0.5}}, tmp_path)
    assert has_compiled(tmp_path) and read_manifest(tmp_path)["lm"] == "fake"
    assert not list(tmp_path.glob("*.tmp*"))  # written under a temporary name, then renamed

    loaded = load_compiled(tmp_path, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert (loaded.settings.upper, loaded.settings.lower) == (0.9, 0.5)
    assert loaded.evaluator.grade.demos[0]["passage"] == "Dune is a novel by Frank Herbert."
    assert loaded(question="Who founded Acme Rockets?").answer.startswith("Acme Rockets was founded by Jane Roe")


class UncopyableKnowledgeBase(ListKnowledgeBase):
    """A knowledge base that refuses a deep copy, as a large index should never get one."""

    def __deepcopy__(self, memo):
        raise AssertionError("the knowledge base was deep-copied")


def test_the_program_is_built_with_everything_and_loaded_without_copying_it(tmp_path, fake_lm):
    # DSPy's Module.load_state deep-copies the whole module first; built with its knowledge
    # base, judges and web, the program loads its prompts predictor by predictor instead
    program = CRAG(knowledge_base=None)
    program.generator.generate.demos = [dspy.Example(question="q", context="c", answer="a")]
    save_compiled(program, {"lm": "fake", "thresholds": {"upper": 0.9, "lower": 0.5}}, tmp_path)
    kb, web, judges = UncopyableKnowledgeBase([FOUNDING]), FakeWeb([]), toy_judges()
    save_judges(judges, tmp_path)
    loaded = load_compiled(tmp_path, knowledge_base=kb, web=web, embedder=None, caps=QuestionCaps(strips=2))
    assert loaded.knowledge_base is kb and loaded.web_searcher.backend is web
    assert loaded.judges is not None and loaded.refiner.judges is loaded.judges is loaded.checker.judges
    assert (loaded.settings.caps.strips, loaded.refiner.max_strips) == (2, 2)
    assert [d["answer"] for d in loaded.generator.generate.demos] == ["a"]


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


def test_the_confidence_model_and_the_operating_point_are_loaded(tmp_path, fake_lm, monkeypatch):
    """``confidence.json`` (python -m optimize.train_confidence) sets the answer-confidence model and
    ``accept``; the operating point ``program index`` saved for this knowledge base wins over its
    ``accept``, and an ``accept`` given to ``load_compiled`` wins over both. Without the file: the
    default weights and ``DEFAULT_ACCEPT``."""
    from program.judges.adapted import adapted_dir
    from program.judges.operating_point import OPERATING_POINT_FILE
    from program.judges.store import corpus_key
    from program.stages.settings import DEFAULT_ACCEPT
    from program.stages.draft import DEFAULT_BIAS, DEFAULT_WEIGHTS

    save_compiled(CRAG(knowledge_base=None), {"lm": "fake"}, tmp_path)
    kb = ListKnowledgeBase([FOUNDING])
    kb.manifest = {"files": {"acme.md": "c0ffee"}}
    plain = load_compiled(tmp_path, knowledge_base=kb, web=None, embedder=None)
    assert (plain.confidence.weights, plain.confidence.bias,
            plain.settings.accept) == (DEFAULT_WEIGHTS, DEFAULT_BIAS, DEFAULT_ACCEPT)
    assert plain.sources["operating point"] == "the default"

    model = {"weights": {"question_coverage": 10.0}, "bias": -9.0, "source": "test rows"}
    (tmp_path / "confidence.json").write_text(json.dumps({"model": model, "accept": 0.3}))
    loaded = load_compiled(tmp_path, knowledge_base=kb, web=None, embedder=None)
    assert loaded.confidence.to_dict() == model and loaded.settings.accept == 0.3
    result = loaded(question="Who founded Acme Rockets?")
    assert result.confidence == 0.7311  # sigmoid(10 * 1.0 - 9): the cited passage holds the whole question

    monkeypatch.setenv("CRAG_STATE_DIR", str(tmp_path / "state"))  # what is learned of a knowledge base is kept there
    point = adapted_dir(tmp_path, kb) / OPERATING_POINT_FILE
    assert point.is_relative_to(tmp_path / "state" / "adapted" / corpus_key(kb))
    point.parent.mkdir(parents=True)
    point.write_text(json.dumps({"accept": 0.8, "source": "labels ours.csv (30 rows)"}))
    own = load_compiled(tmp_path, knowledge_base=kb, web=None, embedder=None)
    assert own.settings.accept == 0.8
    # where the resolution took each value from, as ask prints it; a request's program keeps it
    from program.app.cli import _operating_point_line

    where = f"labels ours.csv (30 rows), {point}"
    assert own.sources == {"thresholds": "retrieval similarity", "judges": "none: the LM judges",
                           "operating point": where, "reader demo": "the compile's", "web": "none"}
    assert _operating_point_line(own.narrowed(own.settings, web=False)) == \
           f"operating point: answers below confidence 0.80 are declined ({where})"
    assert load_compiled(tmp_path, knowledge_base=kb, web=None, embedder=None, accept=0.1).settings.accept == 0.1
    # at 0.8 the same answer (0.73) is declined
    declined = load_compiled(tmp_path, knowledge_base=kb, web=None, embedder=None)(question="Who founded Acme Rockets?")
    assert declined.fallback and declined.outcome.declined == "Acme Rockets was founded by Jane Roe [1]."
