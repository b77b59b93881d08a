"""The project's files point only at pages the repository holds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / f for f in out.splitlines() if f.endswith((".py", ".md", ".js", ".html", ".toml"))]


def test_no_file_points_to_a_design_page_outside_the_repository():
    # the bug: eight docstrings cited DESIGN.md, which lives outside the repository
    me = Path(__file__).resolve()
    named = [str(p.relative_to(ROOT)) for p in tracked_text_files()
             if p.resolve() != me and p.exists() and "DESIGN.md" in p.read_text(encoding="utf-8", errors="ignore")]
    assert named == []


def test_every_docs_page_a_docstring_names_exists():
    missing = set()
    for path in tracked_text_files():
        if path.suffix != ".py" or not path.exists():
            continue
        # a path under a test's own folder ("{tmp}/docs/a.md") is not a page of the repository
        for page in re.findall(r"(?<![\w/}])docs/[\w/.-]+\.md", path.read_text(encoding="utf-8", errors="ignore")):
            if not (ROOT / page).exists():
                missing.add(f"{path.relative_to(ROOT)}: {page}")
    assert sorted(missing) == []
