"""An app loads the committed compiled program (compiled/: prompts, trained judges, thresholds)
through the Python API and answers with the fake LM."""

from __future__ import annotations

from program import load_compiled
from program.app.compiled import COMPILED_DIR, read_manifest
from tests.conftest import FOUNDING, ListKnowledgeBase

OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."


def test_the_committed_compile_answers_with_the_fake_lm(fake_lm):
    manifest = read_manifest(COMPILED_DIR)
    crag = load_compiled(knowledge_base=ListKnowledgeBase([FOUNDING, OFF_TOPIC]), web=None)
    assert crag.judges is not None  # the trained judges came with it
    assert (crag.settings.lower,
            crag.settings.upper) != (None, None) and 0 <= crag.settings.lower <= crag.settings.upper <= 1
    assert manifest["lm"] and manifest["dspy_version"].startswith("3.4")
    result = crag(question="Who founded Acme Rockets?")
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert result.action.value == "correct" and not result.fallback
    assert result.grades[0].passage_id == "doc0#0" and result.grades[0].score >= crag.settings.upper
    assert result.citations[0].text.startswith("Acme Rockets was founded by Jane Roe")
    assert [c.support for c in result.claims] == ["fully"]


def test_the_committed_compiles_rewrite_is_traced_as_the_correction(fake_lm):
    # the bug: a loaded compile's predictors hold a StringSignature, so the step recorder did not
    # know its RewriteQuery: no "rewrite" event, and the web page's strips were labeled "internal"
    import dspy

    from program.app.tracing import StepRecorder
    from tests.conftest import FakeWeb

    page = ("https://en.wikipedia.org/wiki/Acme_Rockets", FOUNDING)
    crag = load_compiled(knowledge_base=ListKnowledgeBase([OFF_TOPIC, "Bananas are yellow."]), web=FakeWeb([page]))
    recorder = StepRecorder()
    with dspy.context(callbacks=[recorder]):
        result = crag(question="Who founded Acme Rockets?")
    assert result.action.value == "incorrect"
    events = [(e["event"], e.get("stage")) for e in recorder.events]
    assert ("rewrite", None) in events and events.index(("rewrite", None)) < events.index(("web", None))
    assert [stage for name, stage in events if name == "strips"] == ["corrected"]


def test_the_factory_sets_every_setting_at_construction(monkeypatch):
    """``self_check`` and the compile's thresholds are constructor arguments, never set afterwards."""
    import program.app.factory as factory
    from program.stages.crag import CRAG

    built = []
    real_init = CRAG.__init__

    def recording_init(self, *args, **kwargs):
        built.append(kwargs)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(CRAG, "__init__", recording_init)
    from tests.conftest import ListKnowledgeBase

    for mode, checks in (("crag", False), ("self-crag", True)):
        program = factory.build_program(mode, compiled_dir=None, knowledge_base=ListKnowledgeBase(["x"]), web="none")
        # one CRAGSettings, resolved in one place (configuration.resolve), given whole to the constructor
        assert built[-1]["settings"].self_check is checks and program.settings.self_check is checks
