"""CRAG's settings and judges: one frozen settings object and the judges, both given at construction."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from program.guards.caps import QuestionCaps
from program.stages.crag import CRAG
from program.stages.settings import DEFAULT_ACCEPT, DEFAULT_VERIFY_BAND, CRAGSettings
from tests.conftest import FOUNDING, ListKnowledgeBase


def test_keywords_are_the_settings_fields_and_the_parts_follow_them():
    caps = QuestionCaps(web_pages=4, strips=3, claims=5)
    program = CRAG(ListKnowledgeBase([FOUNDING]), k=5, upper=0.7, self_check=False, caps=caps)
    assert program.settings == CRAGSettings(k=5, upper=0.7, self_check=False, caps=caps)
    assert (program.settings.accept,
            program.settings.verify_band) == (DEFAULT_ACCEPT, DEFAULT_VERIFY_BAND) == (0.5, 0.1)
    assert (program.web_searcher.k, program.refiner.max_strips, program.checker.max_claims) == (4, 3, 5)
    assert program.mode == "crag" and program.decide_retrieval is False and program.decider is None


def test_settings_and_fields_are_never_merged_here():
    # layers merge in one place (program.app.configuration.resolve), not in the constructor
    with pytest.raises(TypeError, match=r"give settings or its fields \(k\), not both"):
        CRAG(ListKnowledgeBase([FOUNDING]), settings=CRAGSettings(upper=0.7), k=5)


def test_the_settings_cannot_be_changed_on_a_built_program():
    program = CRAG(ListKnowledgeBase([FOUNDING]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        program.settings.k = 9


@pytest.mark.parametrize("fields, message", [
    ({"accept": 1.5}, "accept must be in [0, 1], got 1.5"),
    ({"verify_band": -0.1}, "verify_band must be in [0, 1], got -0.1"),
    ({"upper": 1.7}, "upper must be in [0, 1], got 1.7"),
    ({"lower": 0.9, "upper": 0.3}, "lower must be at most upper, got lower 0.9 and upper 0.3"),
    ({"k": 0}, "k must be at least 1, got 0"),
    ({"max_retries": -1}, "max_retries must be 0 or more, got -1"),
])
def test_a_field_out_of_range_is_refused_by_name(fields, message):
    with pytest.raises(ValueError) as error:
        CRAGSettings(**fields)
    assert str(error.value) == message
    with pytest.raises(ValueError) as error:
        CRAG(ListKnowledgeBase([FOUNDING]), **fields)
    assert str(error.value) == message


def test_a_keyword_that_names_no_setting_is_refused():
    with pytest.raises(TypeError, match="colour"):
        CRAG(ListKnowledgeBase([FOUNDING]), colour="blue")


def test_retrieve_or_not_off_in_the_settings_skips_the_built_decider():
    """The service turns retrieve-or-not off per request on a copy's settings; the decider stays built."""
    program = CRAG(ListKnowledgeBase([FOUNDING]), decide_retrieval=True)
    assert program.decide_retrieval is True and program.decider is not None
    view = copy.copy(program)
    view.settings = dataclasses.replace(program.settings, decide_retrieval=False)
    assert view.decide_retrieval is False and program.decide_retrieval is True


def test_the_judges_are_handed_to_every_stage_at_construction_and_not_set_after():
    judges = object()  # stands for a JudgeSet: only its identity is checked
    program = CRAG(ListKnowledgeBase([FOUNDING]), judges=judges)
    stages = (program.evaluator, program.refiner, program.checker, program.usefulness, program.attributor)
    assert program.judges is judges and all(stage.judges is judges for stage in stages)
    with pytest.raises(AttributeError):
        program.judges = None
