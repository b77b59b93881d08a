"""JSON lines read one way: one object per line, blank lines skipped, errors naming the line.

Split on ``\\n`` only (``str.splitlines`` would also cut at U+2028 inside a JSON string). The
knowledge base's files (``program.retrieval.corpus``), a team's questions file
(``optimize.user_questions``) and the labeled sets read JSONL through ``objects``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path


class JsonlError(ValueError):
    """A line that is not a JSON object. ``where`` is ``path:line``, ``problem`` says what is
    wrong ("not JSON: Expecting value (column 1)", "expected an object, got list")."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}")
        self.where, self.problem = where, problem


class LineTooLong(JsonlError):
    """A line over the caller's ``max_line_bytes``, not parsed; ``size`` is its length in bytes."""

    def __init__(self, where: str, size: int):
        super().__init__(where, f"line too long: {size} bytes")
        self.size = size


def objects(path: str | Path, text: str | None = None, max_line_bytes: int | None = None) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of ``text`` (read from ``path``, UTF-8,
    when None), lines numbered from 1.

    Raises:
        JsonlError: a line that is not JSON, or not an object.
        LineTooLong: a line over ``max_line_bytes`` (UTF-8), before it is parsed.
        OSError, UnicodeDecodeError: reading ``path``.
    """
    text = Path(path).read_text(encoding="utf-8") if text is None else text
    for n, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        if max_line_bytes is not None and len(line) > max_line_bytes // 4 and len(line.encode()) > max_line_bytes:
            raise LineTooLong(f"{path}:{n}", len(line.encode()))
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise JsonlError(f"{path}:{n}", f"not JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(row, dict):
            raise JsonlError(f"{path}:{n}", f"expected an object, got {type(row).__name__}")
        yield n, row


def read_objects(path: str | Path) -> list[dict]:
    """Every object of the JSONL file ``path``, in order (``objects``; same errors)."""
    return [row for _, row in objects(path)]
