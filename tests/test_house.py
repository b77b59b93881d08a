"""The shape of the program a new developer reads: CRAG composed of small step modules, each step
emitting its own events, one mapping of scores to actions besides the route's, one outcome."""

from __future__ import annotations

import ast
import dataclasses
from collections import Counter
from pathlib import Path

import dspy

from program.stages.crag import CRAG
from program.types import CRAGResult, Ending, Outcome
from tests.conftest import ListKnowledgeBase

ROOT = Path(__file__).resolve().parents[1]
STAGES = ROOT / "program" / "stages"


def test_crag_is_a_route_of_small_modules():
    assert len((STAGES / "crag.py").read_text(encoding="utf-8").splitlines()) <= 200
    program = CRAG(ListKnowledgeBase(["Acme Rockets was founded by Jane Roe."]))
    steps = {name: type(value).__name__ for name, value in vars(program).items() if isinstance(value, dspy.Module)}
    assert {"retrieve": "Retrieve", "reader": "Reader", "correct": "Correct", "claim_check": "ClaimCheck",
            "retrieve_or_not": "RetrieveOrNot"}.items() <= steps.items()
    for step in ("retrieve", "reader", "correct", "claim_check", "retrieve_or_not"):
        classes = [n for n in ast.parse((STAGES / f"{step}.py").read_text(encoding="utf-8")).body
                   if isinstance(n, ast.ClassDef) and any(getattr(b, "attr", "") == "Module" for b in n.bases)]
        assert len(classes) == 1, step  # one Module with its forward a file, as DSPy's own


def test_the_compiled_predictors_keep_their_names():
    """The steps borrow the predictors CRAG owns: compiled/crag.json's keys still load."""
    names = {name for name, _ in CRAG(ListKnowledgeBase(["x"]), decide_retrieval=True).named_predictors()}
    assert names == {"decider", "closed_book", "evaluator.grade", "refiner.grade", "web_searcher.rewrite",
                     "followup.rewrite", "generator.generate", "generator.strict", "checker.extract",
                     "checker.support", "usefulness.judge"}


def test_every_predictor_the_compile_and_the_judgments_locate_is_one_of_crags():
    """The compile's specs and the judgment slices find predictors by attribute (``locate``), not
    by path strings; each is one CRAG has, with the Signature it says, and its path is the name
    ``compiled/crag.json`` keeps (a renamed attribute fails here, not in a compile)."""
    from optimize.compile import SPECS
    from program.judgments import JUDGMENTS, predictor_path

    program = CRAG(ListKnowledgeBase(["x"]), decide_retrieval=True)
    located = [(s.locate, s.signature) for s in SPECS] + [(j.locate, j.signature) for j in JUDGMENTS.values()]
    for locate, signature in located:
        assert locate(program).signature.__name__ == signature.__name__
    assert {j.name: predictor_path(program, j.locate) for j in JUDGMENTS.values()} == {
        "passage": "evaluator.grade", "rewrite": "web_searcher.rewrite", "standalone": "followup.rewrite",
        "strip": "refiner.grade", "support": "checker.support", "usefulness": "usefulness.judge"}


def test_the_event_stream_is_emitted_where_steps_run_not_rebuilt_from_callbacks():
    tracing = (ROOT / "program" / "app" / "tracing.py").read_text(encoding="utf-8")
    tree = ast.parse(tracing)
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not any(m and m.startswith("program.stages") for m in imported)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "isinstance"
                and "Module" in ast.unparse(n)]


def test_how_a_question_ended_is_one_field():
    fields = {f.name for f in dataclasses.fields(CRAGResult)}
    assert "outcome" in fields and not fields & {"fallback", "declined", "declined_because", "answered_by",
                                                  "reason", "escalated"}
    assert CRAGResult("q", "a", outcome=Outcome(Ending.STOPPED, "stopped: seconds cap")).fallback
    assert not CRAGResult("q", "a", outcome=Outcome(Ending.DRAFT, "holds up")).fallback


def test_scores_map_to_actions_in_one_place():
    """Only ``program.stages.decision`` turns a score into an action (``decide`` for the route,
    ``evaluator_action`` for the evaluator alone); no other module compares against both thresholds
    to name an action."""
    mapping = []
    for path in (p for folder in ("program", "optimize", "experiments") for p in (ROOT / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if path.name == "decision.py":
            continue
        for node in ast.walk(ast.parse(source)):
            # a score compared with a threshold, naming actions: ``"correct" if best >= upper else ...``
            scored = isinstance(node, ast.IfExp) and isinstance(node.test, ast.Compare)
            named = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)} if scored else set()
            if {"correct", "incorrect"} <= named:
                mapping.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert mapping == []


PARTS = ("content_words", "names", "name_phrase", "digits", "own_words", "premise", "asked_names", "asked_times")


def test_the_question_is_parsed_once_per_question(fake_lm, monkeypatch):
    """Each part of the question is computed once in a whole route (draft, correction from the
    web, claim check, citing), however many steps and judge features read it."""
    from functools import cached_property

    from program.question import Question
    from tests.conftest import FakeWeb

    computed: Counter = Counter()
    for name in PARTS:
        def counted(self, parse=Question.__dict__[name].func, name=name):
            computed[(name, str(self))] += 1
            return parse(self)
        prop = cached_property(counted)
        prop.__set_name__(Question, name)
        monkeypatch.setattr(Question, name, prop)
    question = "Who founded Acme Rockets?"
    web = FakeWeb(["Acme Rockets was founded by Jane Roe in 1999."])
    result = CRAG(ListKnowledgeBase(["The Danube flows through ten countries."]), web=web)(question=question)
    assert result.action is not None and "rewrite" in [s.step for s in result.trace.steps]
    asked = {name: n for (name, text), n in computed.items() if text == question}
    assert asked and set(asked.values()) == {1}, asked


def threshold_reads_outside_slices(files: dict[str, str]) -> list[str]:
    """``path:line: name`` for each place in ``files`` (path under the project -> source) that
    names a judgment's threshold (its key in ``judges.json``, or its thresholds' class) outside
    that judgment's two slices, ``program/judgments/<name>.py`` and ``optimize/judgments/<name>.py``."""
    from program.judgments import JUDGMENTS

    owners: dict[str, str] = {}
    for j in JUDGMENTS.values():
        if j.thresholds is not None:
            owners[j.thresholds.__name__] = j.name
            owners.update({key: j.name for key in j.thresholds().saved()})
    found = []
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            named = (node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else
                     node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else
                     None)
            owner = owners.get(named)
            if owner and path not in (f"program/judgments/{owner}.py", f"optimize/judgments/{owner}.py"):
                found.append(f"{path}:{node.lineno}: {named}")
    return found


def test_a_judgments_thresholds_are_read_only_in_its_slice():
    """A judgment owns its thresholds as a typed object in its slice (``StripThresholds``,
    ``SupportThresholds``): their keys and class are named nowhere else; the rest of the program
    asks the slice for a decision (``support.verdict``, ``strip.kept``, ``keep_threshold``)."""
    from program.judgments import JUDGMENTS

    assert {k for j in JUDGMENTS.values() if j.thresholds for k in j.thresholds().saved()} == {
        "strip_keep", "support_partially", "support_fully"}
    files = {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
             for folder in ("program", "optimize", "experiments") for p in (ROOT / folder).rglob("*.py")}
    assert threshold_reads_outside_slices(files) == []
    # the check finds what it is for: a stage reading the key, another slice naming the class
    assert threshold_reads_outside_slices({
        "program/stages/refine.py": 'keep = judges.thresholds["strip_keep"]',
        "optimize/judgments/strip.py": "cut = SupportThresholds.of(judges).fully",
        "program/judgments/support.py": "cut = SupportThresholds.of(judges).fully"}) == [
        "program/stages/refine.py:1: strip_keep", "optimize/judgments/strip.py:1: SupportThresholds"]
