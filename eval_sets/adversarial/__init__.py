"""The hand-labeled adversarial set: a small Paylane help-centre knowledge base and labeled examples.

Files (JSONL, one object per line; every row has a unique ``id`` and a ``split`` of ``train``, ``dev`` or ``test``):

=========  =====================  =================================  ==============================
kind       signature              inputs                             labels
=========  =====================  =================================  ==============================
grading    GradeRetrieval         question, passage                  reason, relevance
strips     StripRelevance         question, strips                   relevant (1-based)
rewrite    RewriteQuery           question                           expert_terms, relevant_doc_ids
support    CheckClaimSupport      claim, evidence                    support
answers    GenerateAnswer         question, context                  gold_answers, key_facts
queries    (end to end, Paylane)  question                           expected_action, gold_answers, …
=========  =====================  =================================  ==============================

See README.md in this folder for the labeling guide; ``python -m eval_sets.adversarial.validate`` checks it.
"""

from __future__ import annotations

import json
from pathlib import Path

from eval_sets.adversarial.schema import INPUTS, KINDS, LABELS

DATA_DIR = Path(__file__).resolve().parent
KB_DIR = DATA_DIR / "kb"

SPLITS = ("train", "dev", "test")


def _check_kind(kind: str) -> None:
    if kind not in INPUTS:
        raise ValueError(f"unknown kind {kind!r}; expected one of: {', '.join(KINDS)}")


def _check_split(split: str | None) -> None:
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)} (or None for all)")


def data_path(kind: str, directory: str | Path | None = None) -> Path:
    """The JSONL file holding ``kind`` (in ``directory``, by default this package's folder)."""
    _check_kind(kind)
    return Path(directory or DATA_DIR) / f"{kind}.jsonl"


def load_rows(kind: str, split: str | None = None, directory: str | Path | None = None) -> list[dict]:
    """The labeled rows of one kind, as dicts, in file order; ``split`` keeps only ``train``, ``dev`` or ``test``.

    Query rows without ``needs_retrieval`` get ``needs_retrieval: True`` (only chit-chat needs none)."""
    _check_kind(kind)
    _check_split(split)
    rows = []
    with data_path(kind, directory).open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if kind == "queries":
                    row.setdefault("needs_retrieval", True)
                if split is None or row.get("split") == split:
                    rows.append(row)
    return rows


def load_examples(kind: str, split: str | None = None, directory: str | Path | None = None) -> list:
    """The rows as ``dspy.Example`` objects with their inputs marked (see ``INPUTS``).

    Every field of the row is kept on the example (``id``, ``split`` and ``source`` too), so metrics can
    read any label; DSPy adapters use only the signature's fields when formatting demos."""
    import dspy

    inputs = INPUTS.get(kind)
    rows = load_rows(kind, split, directory)
    return [dspy.Example(**row).with_inputs(*inputs) for row in rows]


def load_kb(kb_dir: str | Path | None = None) -> dict[str, str]:
    """The Paylane knowledge base: ``{doc_id: markdown text}``, doc ids being file stems (e.g. ``refunds``)."""
    folder = Path(kb_dir or KB_DIR)
    return {p.stem: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.md"))}


__all__ = [
    "DATA_DIR",
    "INPUTS",
    "KB_DIR",
    "KINDS",
    "LABELS",
    "SPLITS",
    "data_path",
    "load_examples",
    "load_kb",
    "load_rows",
]
