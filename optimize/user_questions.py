"""A team's own labeled questions, from a JSONL or CSV file, as evaluation rows.

Each row (a JSON object per line, or a CSV row under a header) has:

* ``question``: the question, as a user asks it (required, non-empty);
* ``answers``: the gold answers, any one of which found in an answer (case-insensitive) makes it
  right: a JSON list of strings or one string; in CSV one cell, several answers separated by
  ``|``, or a JSON list (a cell starting with ``[`` must be one) (required when the row is
  answerable);
* ``answerable`` (optional, default true): false when the documents do not answer it, so that
  declining is right (JSON ``true``/``false``; CSV ``true``/``false``, ``yes``/``no``, ``1``/``0``);
* ``id`` (optional): the row's name in the results (default ``q-<row number>``).

Other fields are kept out of the rows. Errors: :class:`QuestionsFileError`, one line naming the
file, the row (JSONL line or CSV row, 1-based, the header being row 1) and the field.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from program.jsonl import JsonlError, objects

UNANSWERABLE_GOLD = ["don't know", "don't have reliable information", "not covered", "doesn't say", "does not say"]
_TRUE, _FALSE = {"true", "yes", "1", "y"}, {"false", "no", "0", "n"}


class QuestionsFileError(ValueError):
    """The questions file cannot be read; the one-line message names the file, row and field."""


def _answerable(value, where: str) -> bool:
    if value is None or value == "":
        return True
    if isinstance(value, bool):
        return value
    text = str(value).strip().casefold()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise QuestionsFileError(f"{where}: field 'answerable' must be true or false, got {value!r}")


def _answers(value, where: str, csv_cell: bool) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str) and csv_cell and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise QuestionsFileError(f"{where}: field 'answers' starts like a JSON list but is not one "
                                     f"({exc.msg}); write answers as a|b, or as [\"a\", \"b\"]") from None
        if not isinstance(value, list):
            raise QuestionsFileError(f"{where}: field 'answers' must be a JSON list of strings, got {value!r}")
    if isinstance(value, str):
        parts = value.split("|") if csv_cell else [value]
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        parts = value
    else:
        raise QuestionsFileError(f"{where}: field 'answers' must be a string or a list of strings, "
                                 f"got {type(value).__name__}")
    return [" ".join(p.split()) for p in parts if p.strip()]


def _row(raw: dict, where: str, number: int, csv_cell: bool) -> dict:
    question = raw.get("question")
    if not isinstance(question, str) or not question.strip():
        raise QuestionsFileError(f"{where}: field 'question' is missing or empty")
    answerable = _answerable(raw.get("answerable"), where)
    gold = _answers(raw.get("answers"), where, csv_cell)
    if answerable and not gold:
        raise QuestionsFileError(f"{where}: field 'answers' is empty; an answerable row needs at least one "
                                 "gold answer (or set answerable to false)")
    return {"id": str(raw.get("id") or f"q-{number}"), "question": " ".join(question.split()),
            "relation": "answerable" if answerable else "unanswerable",
            "gold": gold if answerable else UNANSWERABLE_GOLD,
            "expected_action": None, "answerable": answerable, "needs_retrieval": True}


def _jsonl_rows(path: Path, text: str) -> list[dict]:
    try:
        return [_row(raw, f"{path}:{n}", n, csv_cell=False) for n, raw in objects(path, text)]
    except JsonlError as exc:
        raise QuestionsFileError(str(exc)) from None


def _csv_rows(path: Path, text: str) -> list[dict]:
    reader = csv.DictReader(text.splitlines())
    if not reader.fieldnames or "question" not in [f.strip() for f in reader.fieldnames]:
        found = ", ".join(f.strip() for f in reader.fieldnames or []) or "none"
        raise QuestionsFileError(f"{path}:1: the header has no 'question' column (found: {found}; expected: "
                                 "question, answers, answerable, id)")
    rows = []
    for n, raw in enumerate(reader, start=2):
        clean = {(k or "").strip(): v for k, v in raw.items()}
        if not any((v or "").strip() for v in clean.values() if isinstance(v, str)):
            continue
        rows.append(_row(clean, f"{path}:{n}", n, csv_cell=True))
    return rows


def load_questions_file(path: str | Path) -> list[dict]:
    """The rows of the questions file ``path`` (``.jsonl`` or ``.csv``) in ``optimize.eval_data``'s
    uniform shape: ``id``, ``question``, ``relation`` (``answerable`` / ``unanswerable``), ``gold``,
    ``expected_action`` (None), ``answerable``, ``needs_retrieval`` (True).

    Raises:
        QuestionsFileError: a missing or unreadable file, another extension, a bad row or field,
            a duplicate id, or no row at all.
    """
    path = Path(path)
    if path.suffix.lower() not in (".jsonl", ".csv"):
        raise QuestionsFileError(f"{path}: a questions file is .jsonl or .csv, not {path.suffix or '(none)'}")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise QuestionsFileError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise QuestionsFileError(f"{path}: cannot read it as UTF-8 text ({exc})") from None
    rows = _jsonl_rows(path, text) if path.suffix.lower() == ".jsonl" else _csv_rows(path, text)
    if not rows:
        raise QuestionsFileError(f"{path}: no question in it")
    seen: set[str] = set()
    for row in rows:
        if row["id"] in seen:
            raise QuestionsFileError(f"{path}: duplicate id {row['id']!r}")
        seen.add(row["id"])
    return rows
