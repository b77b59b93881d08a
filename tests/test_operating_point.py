"""Where to abstain on a knowledge base, set from its own questions and their look-alikes."""

from __future__ import annotations

import json

import pytest

from program.judges.operating_point import (OperatingPoint, look_alike, save_operating_point,
                                            set_operating_point)
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, ListKnowledgeBase


def test_a_look_alike_changes_a_number_else_swaps_a_name():
    assert look_alike("Can I carry over 40 hours of leave?") == "Can I carry over 127 hours of leave?"
    assert look_alike("Who founded Acme Rockets?") == "Who founded Quillmere Rockets?"
    assert look_alike("how do i reset it?") is None


def test_the_operating_point_declines_the_share_asked_of_the_own_questions(fake_lm):
    crag = CRAG(ListKnowledgeBase([FOUNDING]))
    point = set_operating_point(crag, ["Who founded Acme Rockets?", "Who founded Acme Rockets in 1999?"], decline=0.0)
    # both drafts answer from the passage; the look-alikes' premise ("Quillmere", "3004") is not in it
    assert point.answerable == 2 and point.look_alikes == 2
    assert 0.5 < point.accept <= 1.0 and point.look_alikes_declined == 1.0
    with pytest.raises(ValueError, match="decline must be in"):
        set_operating_point(crag, ["Who founded Acme Rockets?"], decline=1.0)
    with pytest.raises(ValueError, match="no question"):
        set_operating_point(crag, [])


def test_a_saved_operating_point_is_what_the_program_loads(tmp_path, monkeypatch):
    from program.app.compiled import CompiledError, load_confidence
    from program.judges.adapted import adapted_dir

    class KB:  # a knowledge base with a manifest: its corpus key names its folder
        manifest = {"files": {"a.md": "0123"}}

    monkeypatch.setenv("CRAG_STATE_DIR", str(tmp_path / "state"))

    assert load_confidence(tmp_path, KB())[1] == 0.5  # nothing saved: the default
    save_operating_point(OperatingPoint(0.42, 0.1, 30, 20, 0.7), adapted_dir(tmp_path, KB()))
    assert load_confidence(tmp_path, KB())[1] == 0.42
    (tmp_path / "confidence.json").write_text(json.dumps({"model": {"weights": {"support": 1.0}}, "accept": 0.3}))
    model, accept = load_confidence(tmp_path, KB())
    assert (model.weights, accept) == ({"support": 1.0}, 0.42)  # the knowledge base's own point wins
    assert load_confidence(tmp_path, None)[1] == 0.3
    (tmp_path / "confidence.json").write_text(json.dumps({"accept": 7}))
    with pytest.raises(CompiledError, match="'accept' must be a number in"):
        load_confidence(tmp_path, None)


def test_a_time_cap_keeps_what_was_drafted_in_step_and_refuses_too_few(fake_lm, monkeypatch):
    """Each question is drafted beside its look-alike; a cap that stops the drafting keeps both
    kinds in step, and fewer than ``MIN_ANSWERABLE`` own drafts set no point."""
    from types import SimpleNamespace

    import program.judges.operating_point as op

    crag = CRAG(ListKnowledgeBase([FOUNDING]))
    clock = iter(range(0, 1000, 10))  # each reading of the clock is 10 s later
    monkeypatch.setattr(op, "time", SimpleNamespace(perf_counter=lambda: next(clock)))
    questions = [f"Who founded Acme Rockets in {1990 + i}?" for i in range(8)]
    point = set_operating_point(crag, questions, decline=0.0, time_cap=55.0)
    assert (point.answerable, point.look_alikes) == (5, 5)  # checks at 10, 20, ..., 60 s: the sixth stops
    clock = iter(range(0, 1000, 10))
    with pytest.raises(ValueError, match=r"^only 2 of 8 questions drafted within 25 s$"):
        set_operating_point(crag, questions, decline=0.0, time_cap=25.0)
