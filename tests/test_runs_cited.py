"""Every run folder kept in the repository is cited, and every reference page stays short.

A folder of ``docs/lab/runs/`` or ``reports/`` is cited when the README, a page of ``docs/``
(lab notes included, the runs' own files not), or the code names it: by its path, by a path
pattern (``followups-$d-$sp-asked``, ``reports/<set>-dev-cache``, ``*-test-{asked,standalone}-2``),
or by its name in backticks. A folder nothing cites is a figure no page stands behind.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("docs/lab/runs", "reports")
PATH = re.compile(r"(docs/lab/runs|reports)/([\w$*{},<>.\-]+)")
NAMED = re.compile(r"`([\w.\-]+)`")


def expand(pattern: str) -> list[str]:
    """``a-{x,y}-b`` -> ``["a-x-b", "a-y-b"]`` (nested braces expanded left to right)."""
    brace = re.search(r"\{([^{}]*)\}", pattern)
    if brace is None:
        return [pattern]
    return [out for alt in brace.group(1).split(",")
            for out in expand(pattern[:brace.start()] + alt + pattern[brace.end():])]


def citations(texts: list[str]) -> dict[str, set[str]]:
    """Per runs folder, the glob patterns of the folder names ``texts`` cite."""
    cited = {base: set() for base in RUNS}
    for text in texts:
        for base, name in PATH.findall(text):
            name = re.sub(r"\$\w+|<[^>]*>", "*", name.rstrip(".,"))
            cited[base].update(e.split("/")[0] for e in expand(name))
        for name in NAMED.findall(text):
            for base in RUNS:
                cited[base].add(name)
    return cited


def uncited(base: Path, patterns: set[str]) -> list[str]:
    """The folders under ``base`` no pattern matches."""
    return sorted(d.name for d in base.iterdir()
                  if d.is_dir() and not any(fnmatch.fnmatchcase(d.name, p) for p in patterns))


def project_texts() -> list[str]:
    files = [ROOT / "README.md", *ROOT.glob("docs/**/*.md"),
             *(p for folder in ("program", "optimize", "experiments") for p in (ROOT / folder).rglob("*.py"))]
    return [p.read_text(encoding="utf-8") for p in files if "docs/lab/runs" not in p.relative_to(ROOT).as_posix()]


def test_patterns_cite_what_they_name(tmp_path):
    for name in ("followups-owasp-test-asked-2", "handbook-dev-cache", "gate-run", "x-1"):
        (tmp_path / name).mkdir()
    cited = citations(["--out docs/lab/runs/followups-$d-$sp-{asked,standalone}-2", "reports/<set>-dev-cache.",
                       "a table row (`gate-run`)"])
    assert uncited(tmp_path, cited["docs/lab/runs"] | cited["reports"]) == ["x-1"]


@pytest.mark.parametrize("base", RUNS)
def test_every_run_folder_kept_is_cited(base):
    assert uncited(ROOT / base, citations(project_texts())[base]) == []


def test_the_readme_and_every_reference_page_stay_short():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    assert {p.name: n for p in pages if (n := len(p.read_text(encoding="utf-8").splitlines())) > 150} == {}
