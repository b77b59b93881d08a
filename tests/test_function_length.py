"""No function over 60 lines in ``program/``, ``optimize/``, ``experiments/`` and ``eval_sets/``.

The functions that were longer when this check came in are listed with their length; each may
only shrink, and leaves the list once it is 60 lines or fewer. A new long function fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 60
STILL_LONG: dict[str, int] = {}  # to split; "file:function": lines today


def function_lengths() -> dict[str, int]:
    """``"file:function"`` -> lines (decorators excluded) for every function over ``LIMIT`` lines."""
    out = {}
    for folder in ("program", "optimize", "experiments", "eval_sets"):
        for f in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > LIMIT:
                        out[f"{f.relative_to(ROOT).as_posix()}:{node.name}"] = lines
    return out


def test_no_new_function_is_over_60_lines_and_the_old_ones_only_shrink():
    found = function_lengths()
    new = {k: v for k, v in found.items() if k not in STILL_LONG}
    grown = {k: (STILL_LONG[k], v) for k, v in found.items() if k in STILL_LONG and v > STILL_LONG[k]}
    assert not new, f"functions over {LIMIT} lines: {new}"
    assert not grown, f"listed functions that grew (listed, now): {grown}"


def test_the_list_holds_only_functions_still_over_the_limit():
    found = function_lengths()
    done = sorted(k for k in STILL_LONG if k not in found)
    assert not done, f"now {LIMIT} lines or fewer, take them off STILL_LONG: {done}"
