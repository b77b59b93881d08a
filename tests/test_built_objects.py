"""Nothing is assigned to a built object from outside it: each gets its slice when it is built
(``program.app.configuration.resolve`` then ``build``; a request's narrower program is built
too, ``CRAG.narrowed``; a changed judge set is a new ``JudgeSet``, ``dataclasses.replace``).

``BUILT`` lists every built type. A walk over ``program/`` and ``optimize/`` reads the attributes
each of them owns (what its class assigns to ``self``, its dataclass fields) and finds every
assignment, outside the class that owns the attribute, to an attribute chain through one of
them: ``crag.generator.x = ...``, ``judges.choices["support"] = ...`` (a subscript),
``a, kb.changes = ...`` (a nested target), ``lm.cache = False`` (DSPy's own attributes of an LM
or a predictor). An attribute name that a record type (a result, a report, a trace step) owns
too is left out: the walk cannot tell the two apart by name.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("program", "optimize")
BUILT = (
    # the program and its steps
    "CRAG", "Retrieve", "Reader", "Correct", "ClaimCheck", "RetrieveOrNot", "RetrievalEvaluator",
    "InstructionFilter", "KnowledgeRefiner", "WebSearcher", "FollowUp", "AnswerGenerator", "ClaimChecker",
    "UsefulnessJudge", "Attributor", "ClosedBook", "VanillaRAG", "LangGraphCRAG",
    # the judges, the confidence model, the settings
    "JudgeSet", "LinearJudge", "InstructionJudge", "ConfidenceModel", "ProgramConfig", "CRAGSettings",
    "QuestionCaps", "WebConfig",
    # knowledge bases, embedders, web backends, the LM
    "KnowledgeBase", "PgVectorKnowledgeBase", "Embedder", "ServedEmbedder", "OfflineSnapshotBackend",
    "SearxngBackend", "DuckDuckGoBackend", "WikipediaBackend", "KeyedBackend", "PageFetcher", "RetryingLM",
    "LlamaCppEngine",
)
DSPY_OWNED = {"cache", "kwargs", "demos", "signature", "lm"}  # dspy.LM's and dspy.Predict's
THIRD_PARTY_ROOTS = {"app", "session"}  # FastAPI's app.state, a requests.Session: not built here


def flat_targets(node: ast.AST) -> list[ast.expr]:
    """The assignment targets of ``node``, tuples, lists and starred targets unpacked."""
    targets = (node.targets if isinstance(node, ast.Assign) else
               [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
    out: list[ast.expr] = []
    while targets:
        t = targets.pop(0)
        if isinstance(t, (ast.Tuple, ast.List)):
            targets[:0] = t.elts
        elif isinstance(t, ast.Starred):
            targets.insert(0, t.value)
        else:
            out.append(t)
    return out


def chain(target: ast.expr) -> list[str]:
    """``a.b[i].c[j]`` -> ``["a", "b", "c"]``: the names along the target, subscripts passed
    through; ``[]`` when the root is not a plain name or the target is a plain name."""
    parts = []
    while isinstance(target, (ast.Attribute, ast.Subscript)):
        if isinstance(target, ast.Attribute):
            parts.append(target.attr)
        target = target.value
    return [target.id, *reversed(parts)] if isinstance(target, ast.Name) and parts else []


def owned_attributes(sources: dict[str, str]) -> dict[str, set[str]]:
    """Class name -> the attributes it owns: ``self.x = ...`` in its methods, its annotated fields."""
    owned: dict[str, set[str]] = {}
    for source in sources.values():
        for cls in (n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)):
            names = owned.setdefault(cls.name, set())
            names.update(s.target.id for s in cls.body
                         if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name))
            for node in ast.walk(cls):
                for t in flat_targets(node):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        names.add(t.attr)
    return owned


def watched(owned: dict[str, set[str]]) -> set[str]:
    """The built types' attributes that no other class owns too, and DSPy's."""
    built = set().union(*(owned.get(c, set()) for c in BUILT))
    records = set().union(*(names for c, names in owned.items() if c not in BUILT))
    return (built - records) | DSPY_OWNED


def outside_assignments(source: str, names: set[str], owned: dict[str, set[str]]) -> list[tuple[int, str]]:
    """``(line, target)`` of each assignment in ``source`` through an attribute of ``names``,
    outside a class that owns that attribute."""
    found = []

    def visit(node: ast.AST, classes: tuple[str, ...]) -> None:
        if isinstance(node, ast.ClassDef):
            classes = (*classes, node.name)
        for t in flat_targets(node):
            names_along = chain(t)
            if not names_along or names_along[0] in THIRD_PARTY_ROOTS:
                continue
            through = names_along[2:] if names_along[0] in ("self", "cls") else names_along[1:]
            hit = [n for n in through if n in names and not any(n in owned.get(c, ()) for c in classes)]
            if hit:
                found.append((node.lineno, ".".join(names_along)))
        for child in ast.iter_child_nodes(node):
            visit(child, classes)

    visit(ast.parse(source), ())
    return found


def project_sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
            for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))}


def test_the_walk_finds_subscripts_nested_targets_and_dspy_attributes():
    owned = {"JudgeSet": {"choices"}, "KnowledgeBase": {"changes"}, "CRAG": {"generator"}, "Report": {"chunks"}}
    names = {"choices", "changes", "generator", "cache", "demos"}
    source = ("judges.choices['support'] = c\n"
              "a, kb.changes = 1, c\n"
              "lm.cache = False\n"
              "predictors['x'].demos = []\n"
              "crag.generator.generate.demos = []\n"
              "report.chunks = 3\n"
              "self.judges = judges\n"
              "app.state.runners = r\n"
              "class KnowledgeBase:\n    def reused(self):\n        new.changes = c\n")
    assert outside_assignments(source, names, owned) == [
        (1, "judges.choices"), (2, "kb.changes"), (3, "lm.cache"), (4, "predictors.demos"),
        (5, "crag.generator.generate.demos")]


def test_every_built_type_is_a_class_of_the_program():
    owned = owned_attributes(project_sources())
    assert [c for c in BUILT if c not in owned] == []


def test_nothing_is_assigned_to_a_built_object_from_outside():
    sources = project_sources()
    owned = owned_attributes(sources)
    names = watched(owned)
    found = [f"{path}:{line}: {target}" for path, source in sources.items()
             for line, target in outside_assignments(source, names, owned)]
    assert found == []
