"""No import circle in ``program/``: the graph of its modules, imports inside functions included,
has no cycle (``graphlib`` finds one when there is). A circle hidden by an import inside a function
still breaks the layering it hides, so those count too."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package`` (a package is its ``__init__``)."""
    out = {}
    for f in package.rglob("*.py"):
        parts = f.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def imported(name: str, file: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``file`` (module ``name``) imports, anywhere in it."""
    targets = set()
    for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1
                package = name.split(".") if file.name == "__init__.py" else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            # "from a.b import c" imports the module a.b.c when there is one, else a name of a.b
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names)
    found = set()
    for target in targets:
        while target and target not in known:  # a name inside a module: the module
            target = target.rpartition(".")[0]
        if target and target != name:
            found.add(target)
    return found


def import_cycle(package: Path) -> list[str] | None:
    """One import circle among ``package``'s modules (``[a, b, ..., a]``), or None."""
    known = modules(package)
    graph = {name: imported(name, file, known) for name, file in known.items()}
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return None


def test_the_program_has_no_import_circle():
    cycle = import_cycle(ROOT / "program")
    assert cycle is None, "import circle: " + " -> ".join(cycle)


@pytest.mark.parametrize("where", ["top", "function"])
def test_a_planted_circle_is_caught_at_the_top_or_inside_a_function(where, tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub.b import thing\n")
    (package / "sub" / "b.py").write_text("from . import c\nthing = 1\n")
    body = "from ..a import x\n" if where == "top" else "def late():\n    from pkg import a\n    return a\n"
    (package / "sub" / "c.py").write_text(body)
    assert sorted(set(import_cycle(package))) == ["pkg.a", "pkg.sub.b", "pkg.sub.c"]
    (package / "sub" / "c.py").write_text("import json\n")  # the circle broken
    assert import_cycle(package) is None
