"""PopQA long-tail: paths of the data files and a deterministic, relation-stratified sampler.

Files (see README.md in this folder):
    ``QUESTIONS_PATH``       questions.dev.jsonl   1,099 questions with gold answers
    ``KNOWLEDGE_BASE_PATH``  knowledge_base.jsonl  1,399 internal documents (``doc_id``, ``text``)
    ``WEB_SNAPSHOT_PATH``    web_snapshot.jsonl    1,580 offline web pages (``url``, ``title``, ``paragraphs``)

Sampling rule of :func:`load_questions` (the file is grouped by relation, so a plain head would
be all "occupation"): the questions of each relation are shuffled with a generator seeded by
``(seed, relation)``; the relations themselves are put in an order shuffled by ``seed``; then
questions are dealt round-robin, one per relation per round, skipping relations that ran out.
The full dealt order is fixed by ``seed``, and ``limit=N`` takes its first N rows, so

* the same ``limit`` and ``seed`` always give the same ids, in the same order;
* the sample is prefix-stable: the sample for N is contained in the sample for N + k;
* any ``limit >= number of relations`` (14) covers every relation.

Round-robin over-represents small relations compared with the file's own distribution (for
14 relations each gets ~N/14 until the small ones, e.g. "capital of" with 4 rows, run out);
that is deliberate: small samples should show every kind of question.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

POPQA_DIR = Path(__file__).resolve().parent
QUESTIONS_PATH = POPQA_DIR / "questions.dev.jsonl"
KNOWLEDGE_BASE_PATH = POPQA_DIR / "knowledge_base.jsonl"
WEB_SNAPSHOT_PATH = POPQA_DIR / "web_snapshot.jsonl"

_FIELDS = ("id", "question", "possible_answers", "relation", "subject")


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSON-lines file into a list of dicts (blank lines skipped).

    Raises:
        FileNotFoundError: the file does not exist.
        json.JSONDecodeError: a line is not valid JSON.
    """
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def round_robin_order(rows: list[dict], seed: int = 0, key: str = "relation") -> list[dict]:
    """Deal ``rows`` round-robin over the groups given by ``row[key]`` (rule in the module doc).

    Args:
        rows: the rows, in any order (the result does not depend on ties in file order
            beyond each group's own file order, which the seeded shuffle then permutes).
        seed: integer seed; the same seed always gives the same order.
        key: the field to group by.

    Returns:
        All of ``rows`` (same dict objects), reordered; length ``len(rows)``.
    """
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key, "")), []).append(row)
    for name, members in groups.items():
        # str seeds are hashed with sha512 by random.Random: stable across runs and platforms.
        random.Random(f"{seed}:{name}").shuffle(members)
    names = sorted(groups)
    random.Random(seed).shuffle(names)
    ordered: list[dict] = []
    depth = max((len(m) for m in groups.values()), default=0)
    for i in range(depth):
        ordered.extend(groups[name][i] for name in names if i < len(groups[name]))
    return ordered


def load_questions(limit: int | None = None, seed: int = 0, path: str | Path = QUESTIONS_PATH) -> list[dict]:
    """Load PopQA questions, optionally a seeded sample spread over the relations.

    Args:
        limit: number of questions to return; None (or a number ≥ the file size) returns all
            of them, in the dealt order described in the module docstring.
        seed: seed of the sample; same ``limit`` + ``seed`` → same ids.
        path: the questions file (default: ``QUESTIONS_PATH``).

    Returns:
        A list of ``min(limit, 1099)`` dicts with keys ``id`` (str, e.g. ``"popqa-0001"``),
        ``question`` (str), ``possible_answers`` (list[str], any one counts as correct),
        ``relation`` (str) and ``subject`` (str).

    Raises:
        ValueError: ``limit`` is not positive.
        FileNotFoundError: the questions file is missing.
    """
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    rows = round_robin_order(read_jsonl(path), seed=seed)
    if limit is not None:
        rows = rows[:limit]
    return [{k: row.get(k) for k in _FIELDS} for row in rows]
