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


def unexplained_function_imports(package: Path) -> list[str]:
    """``"file:line"`` of every import inside a function of ``package`` with no comment saying why:
    on its own line, or on the line above the block of imports it belongs to."""
    out = []
    for f in sorted(package.rglob("*.py")):
        lines = f.read_text(encoding="utf-8").splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or "#" in lines[node.lineno - 1]:
                    continue
                above = node.lineno - 2  # walk up over the block's other imports and blank lines
                while above >= 0 and (not lines[above].strip()
                                      or lines[above].lstrip().startswith(("import ", "from "))):
                    above -= 1
                if above < 0 or not lines[above].lstrip().startswith("#"):
                    out.append(f"{f.relative_to(package.parent).as_posix()}:{node.lineno}")
    return sorted(set(out))


def test_every_import_inside_a_function_says_why():
    """Imports sit at the top of modules; one inside a function loads something heavy or optional
    lazily on purpose, and a comment says so."""
    assert unexplained_function_imports(ROOT / "program") == []


def test_an_unexplained_function_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("def f():\n    import json\n    return json\n\n\n"
                                  "def g():\n    # lazy on purpose: heavy\n"
                                  "    import csv\n    import json\n    return csv, json\n")
    assert unexplained_function_imports(package) == ["pkg/a.py:2"]


def test_the_program_top_level_holds_only_shared_modules():
    """The program's parts live in packages (stages, judges, judgments, adaptation, retrieval, web,
    lm, guards, app); at the top only what every part shares: the typed objects between stages,
    the question parsed once, text helpers, paths, environment flags, atomic writes, JSON lines read one way and the
    knowledge base's state (blobs written atomically, read by the judges and kept by the
    knowledge bases)."""
    top = sorted(f.name for f in (ROOT / "program").glob("*.py"))
    assert top == ["__init__.py", "__main__.py", "atomic.py", "env.py", "jsonl.py", "paths.py", "question.py",
                   "state.py", "text.py", "types.py"]
    packages = sorted(d.name for d in (ROOT / "program").iterdir() if (d / "__init__.py").is_file())
    assert packages == ["adaptation", "app", "guards", "judges", "judgments", "lm", "retrieval", "stages", "web"]


def outside_imports(package: Path, banned: tuple[str, ...]) -> list[str]:
    """``"file: module"`` for every import in ``package`` (inside functions too) of a module under
    one of the ``banned`` top-level packages."""
    out = []
    for f in sorted(package.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            out += [f"{f.relative_to(package.parent).as_posix()}: {n}" for n in names if n.split(".")[0] in banned]
    return sorted(out)


def test_the_program_never_imports_the_compile_the_studies_or_the_labeled_sets():
    """``program/`` is the library an app loads, what runs at ``ask``, ``serve`` and ``index`` time;
    the compile and the judges' training (``optimize/``), the studies (``experiments/``) and the
    labeled sets (``eval_sets/``) build on it, never the other way round."""
    assert outside_imports(ROOT / "program", ("optimize", "experiments", "eval_sets")) == []


def test_the_compile_never_imports_the_studies():
    assert outside_imports(ROOT / "optimize", ("experiments",)) == []


def test_a_planted_outside_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("import json\n\n\ndef f():\n"
                                  "    from optimize.adapt import x  # why: planted\n    return x\n")
    assert outside_imports(package, ("optimize",)) == ["pkg/a.py: optimize.adapt"]


def test_the_judges_package_holds_no_training():
    judges = {f.stem for f in (ROOT / "program" / "judges").glob("*.py")}
    assert not judges & {"train", "pairs", "sources", "adapt", "synthetic_rows", "lm_questions", "cross_encoder"}


# program/'s packages from the top floor down: a module imports only its own floor and those below
FLOORS = [("app",), ("adaptation",), ("stages",), ("judges", "judgments", "lm", "web"), ("retrieval", "guards"),
          ("types",), ("atomic", "env", "paths", "text")]


def imports_up(package: Path, floors: list[tuple[str, ...]]) -> list[str]:
    """``module -> target`` for each import (inside functions too) of a package on a higher floor."""
    floor = {name: i for i, names in enumerate(floors) for name in names}
    known = modules(package)

    def place(module: str):
        parts = module.split(".")
        return floor.get(parts[1]) if len(parts) > 1 else None

    return sorted(f"{name} -> {target}" for name, file in known.items() if place(name) is not None
                  for target in imported(name, file, known)
                  if place(target) is not None and place(target) < place(name))


def test_no_module_of_the_program_imports_a_package_above_its_own():
    # the two that did: the adaptation read the app's resources, a judge module cut strips with a stage's code
    assert imports_up(ROOT / "program", FLOORS) == []
    assert sorted(d.name for d in (ROOT / "program").iterdir() if (d / "__init__.py").is_file()) == sorted(
        name for names in FLOORS for name in names if (ROOT / "program" / name).is_dir())


def test_a_planted_import_up_is_found(tmp_path):
    package = tmp_path / "pkg"
    for sub in ("high", "low"):
        (package / sub).mkdir(parents=True)
        (package / sub / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "high" / "top.py").write_text("from pkg.low import base\n")
    (package / "low" / "base.py").write_text("def late():\n    from pkg.high import top\n    return top\n")
    assert imports_up(package, [("high",), ("low",)]) == ["pkg.low.base -> pkg.high.top"]
