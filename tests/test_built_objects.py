"""Nothing is assigned to a built stage, judge, generator or program: each gets its slice when
it is built (``program.app.configuration.resolve`` then ``build``; a request's narrower program
is built too, ``CRAG.narrowed``). A walk over ``program/`` and ``optimize/`` finds every
assignment to an attribute reached through such an object (``crag.generator.x = ...``,
``judges.embedder = ...``, ``self.generator.generate.demos = ...``); a constructor setting its
own attributes (``self.judges = judges``) is what building is."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUILT = {"program", "crag", "view", "baseline", "judges", "generator", "checker", "evaluator", "refiner",
         "predictor", "reader", "attributor", "usefulness", "web_searcher", "decider", "stage"}


def chain(node: ast.Attribute) -> list[str]:
    """``a.b.c`` -> ``["a", "b", "c"]`` (``[]`` when the root is not a plain name)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else []


def patched(source: str) -> list[tuple[int, str]]:
    """``(line, target)`` of each assignment to an attribute of a built object in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            names = chain(target) if isinstance(target, ast.Attribute) else []
            through = names[:-1] if names[:1] not in (["self"], ["cls"]) else names[1:-1]
            if any(name in BUILT for name in through):
                found.append((node.lineno, ".".join(names)))
    return found


def test_the_walk_finds_a_patch_and_passes_a_constructor():
    assert patched("baseline.generator = crag.generator\njudges.embedder = e\nself.generator.generate.demos = []") == \
           [(1, "baseline.generator"), (2, "judges.embedder"), (3, "self.generator.generate.demos")]
    assert patched("self.judges = judges\nresult.answer = a\nself.settings = s\ncost.notes = n") == []


def test_nothing_is_assigned_to_a_built_stage_judge_generator_or_program():
    found = [f"{path.relative_to(ROOT)}:{line}: {target}"
             for folder in ("program", "optimize") for path in sorted((ROOT / folder).rglob("*.py"))
             for line, target in patched(path.read_text(encoding="utf-8"))]
    assert found == []
