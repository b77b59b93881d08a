"""``docs/settings.md`` names every environment variable the program reads and every flag of
``ask``, ``serve`` and ``index``: a setting added without a row fails here."""

from __future__ import annotations

import re

from program.app.cli import _parser
from program.paths import PROJECT_ROOT

DOC = (PROJECT_ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
VARIABLE = re.compile(r"\b(CRAG_[A-Z0-9_]+|[A-Z]+_API_KEY|SEARXNG_URL)\b")


def test_every_environment_variable_the_program_reads_has_a_row():
    read = set()
    for path in (PROJECT_ROOT / "program").rglob("*.py"):
        read |= set(VARIABLE.findall(path.read_text(encoding="utf-8")))
    read -= {"CRAG_MODES"}  # a constant's name (program/app/factory.py), not a variable
    assert len(read) >= 26
    assert sorted(v for v in read if f"`{v}`" not in DOC) == []


def test_every_flag_of_ask_serve_and_index_has_a_row():
    commands = next(a for a in _parser()._actions if a.dest == "command").choices
    for name in ("ask", "serve", "index"):
        flags = {s for a in commands[name]._actions for s in a.option_strings if s not in ("-h", "--help")}
        flags -= {"--json"}  # ask's output format, documented with ask in docs/usage.md
        assert sorted(f for f in flags if f"`{f}`" not in DOC) == [], name
