"""Refining the knowledge base's passages where it keeps the answer: the per-knowledge-base
setting (``program.app.refinement``), the route that reads the kept strips, and the labels
``optimize.refine_recall`` counts."""

from __future__ import annotations

import json

import pytest

from optimize.refine_recall import answering
from program.app.compiled import refinement_for
from program.app.refinement import REFINEMENT_FILE, save_refinement
from program.judges.store import corpus_key
from program.stages.crag import CRAG
from program.types import Action
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase

Q = "Who founded Acme Rockets?"
PAGE = "Rockets are fun to watch on a clear night. " + FOUNDING + " The sky over the launch site is usually blue."


class NamedKnowledgeBase(ListKnowledgeBase):
    """A knowledge base with the identity (``manifest``) that ``corpus_key`` reads."""

    def __init__(self, texts, files):
        super().__init__(texts)
        self.manifest = {"files": files}


def test_the_measured_recall_sets_refinement_at_90_percent(tmp_path):
    path = save_refinement(tmp_path, {"aaaa": {"name": "popqa", "recall": 0.9216},
                                      "bbbb": {"name": "kubernetes", "recall": 0.57}})
    saved = json.loads(path.read_text())
    assert saved["min_recall"] == 0.9
    assert {k: v["refine_passages"] for k, v in saved["by_corpus"].items()} == {"aaaa": True, "bbbb": False}
    assert saved["by_corpus"]["aaaa"]["name"] == "popqa"


def test_a_knowledge_base_is_refined_only_where_the_file_says_so(tmp_path):
    popqa, own = NamedKnowledgeBase([FOUNDING], {"a.md": "1"}), NamedKnowledgeBase([FOUNDING], {"b.md": "2"})
    assert refinement_for(tmp_path, popqa) is False  # no file: read whole
    save_refinement(tmp_path, {corpus_key(popqa): {"recall": 0.92}})
    assert refinement_for(tmp_path, popqa) is True
    assert refinement_for(tmp_path, own) is False  # a knowledge base the file does not name
    assert refinement_for(tmp_path, ListKnowledgeBase([FOUNDING])) is False  # no identity


@pytest.mark.parametrize("text, message", [
    ('{"by_corpus": ', r"{f} is not valid JSON: Expecting value at line 1 column 15"),
    ('[1]', r"{f} must hold a JSON object, not list"),
    ('{"by_corpus": {"KEY": {"refine_passages": "yes"}}}',
     r"{f}: by_corpus\.KEY\.refine_passages must be true or false, got 'yes'"),
])
def test_a_broken_refinement_file_is_refused_in_one_line_naming_it(tmp_path, text, message):
    import re

    kb = NamedKnowledgeBase([FOUNDING], {"a.md": "1"})
    (tmp_path / REFINEMENT_FILE).write_text(text.replace("KEY", corpus_key(kb)))
    with pytest.raises(ValueError) as caught:
        refinement_for(tmp_path, kb)
    expected = message.format(f=re.escape(str(tmp_path / REFINEMENT_FILE))).replace("KEY", corpus_key(kb))
    assert re.fullmatch(expected, str(caught.value)), str(caught.value)


def test_refined_the_draft_reads_the_kept_strip_not_the_whole_passage(fake_lm):
    program = CRAG(ListKnowledgeBase([PAGE]), web=FakeWeb([]), refine_passages=True, self_check=False)
    result = program(question=Q)
    # the founding sentence is the one strip kept; the night sky and the blue sky are not read
    assert [(s.source_id, s.text) for s in result.strips] == [("doc0#0", FOUNDING)]
    assert "Jane Roe" in result.answer and not result.fallback
    steps = [s.step for s in result.trace.steps]
    assert steps[:4] == ["retrieve", "evaluate", "refine", "draft"]
    assert fake_lm.calls["GenerateAnswer"] == 1


def test_refined_with_no_strip_kept_no_draft_is_written_and_the_web_answers(fake_lm):
    off_topic = "The Danube flows through ten countries. It is Europe's second-longest river."
    program = CRAG(ListKnowledgeBase([off_topic]), web=FakeWeb([("https://acme.example/about", PAGE)]),
                   refine_passages=True, self_check=False)
    result = program(question=Q)
    assert "refine: no strip of the passages is kept; nothing to read from them" in result.trace.events
    assert result.action is Action.INCORRECT and result.draft == ""
    # one LM call: the answer from the web page's kept strip (no draft from the Danube)
    assert fake_lm.calls["GenerateAnswer"] == 1 and "Jane Roe" in result.answer
    assert [s.text for s in result.strips] == [FOUNDING]


def test_refined_with_no_strip_kept_and_no_web_the_program_declines(fake_lm):
    off_topic = "The Danube flows through ten countries. It is Europe's second-longest river."
    result = CRAG(ListKnowledgeBase([off_topic]), web=None, refine_passages=True, self_check=False)(question=Q)
    assert result.fallback and fake_lm.calls["GenerateAnswer"] == 0


def test_the_operating_point_and_the_confidence_rows_read_what_the_draft_reads(fake_lm):
    # the bug: both read the passages whole even where the program reads them refined
    from program.judges.operating_point import draft_confidence

    program = CRAG(ListKnowledgeBase([PAGE]), web=FakeWeb([]), refine_passages=True, self_check=False)
    strips, grades = program.draft_context(Q)
    assert [(s.source_id, s.text) for s in strips] == [("doc0#0", FOUNDING)] and len(grades) == 1
    assert draft_confidence(program, Q) == pytest.approx(program(question=Q).confidence)
    off_topic = CRAG(ListKnowledgeBase(["The Danube flows through ten countries."]), web=None,
                     refine_passages=True, self_check=False)
    calls = fake_lm.calls["GenerateAnswer"]
    # no strip kept: no draft, so no LM call and confidence 0 (read whole, the Danube was drafted from)
    assert draft_confidence(off_topic, Q) == 0.0 and fake_lm.calls["GenerateAnswer"] == calls
    whole = CRAG(ListKnowledgeBase([PAGE]), web=FakeWeb([]), self_check=False)
    assert [s.text for s in whole.draft_context(Q)[0]] == [PAGE]


def test_read_whole_by_default(fake_lm):
    result = CRAG(ListKnowledgeBase([PAGE]), web=FakeWeb([]), self_check=False)(question=Q)
    assert [s.source_id for s in result.strips] == ["doc0#0"] and result.strips[0].text == PAGE
    assert "refine" not in [s.step for s in result.trace.steps]


@pytest.mark.parametrize("strip, passage, expected", [
    ("Acme Rockets was founded by Jane Roe in 1999.", "", True),
    ("She founded it with Jane Roe in 1999.", "Acme Rockets is a rocket maker.",
     True),  # a pronoun after a passage about it
    ("She founded it with Jane Roe in 1999.", "The Danube is a river.", False),  # the pronoun is about another subject
    ("Acme Rockets builds small rockets.", "", False),  # about the subject, no answer
])
def test_an_answering_strip_names_the_subject_and_states_an_answer(strip, passage, expected):
    question = {"subject": "Acme Rockets", "possible_answers": ["Jane Roe"]}
    assert answering(strip, passage or strip, question) is expected
