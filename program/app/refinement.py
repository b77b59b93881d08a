"""Which knowledge bases the reader reads refined (CRAG §4.4's decompose-then-recompose).

Refining a passage into knowledge strips pays only where the strip judge keeps the strip that
answers: a reader given strips that lost the answer cannot write it, and where the program
refines, a question with no strip kept gets no draft from its passages (CRAG's *incorrect*).
So refinement is a measured, per-knowledge-base setting: ``<compiled>/refinement.json``
(written by ``python -m optimize.refine_recall``) holds, per ``corpus_key``, the share of
labeled questions with an answering strip in their passages that kept one (``recall``), and
``refine_passages`` is true where it is at least ``MIN_RECALL``. A knowledge base not in the
file (every user's own) is read whole.

File shape::

    {"min_recall": 0.9,
     "by_corpus": {"657ad1094352cd46": {"name": "popqa", "split": "dev", "questions": 153,
                                         "kept": 141, "recall": 0.9216, "nothing_kept": 94,
                                         "nothing_kept_answerable": 8, "refine_passages": true}}}
"""

from __future__ import annotations

import json
from pathlib import Path

from program.atomic import write_atomic
from program.judges.store import corpus_key

REFINEMENT_FILE = "refinement.json"
# PopQA's strip judge keeps 92 % (dev), documentation's a third to a half: the bar sits between
MIN_RECALL = 0.9


def refines_passages(data: dict, knowledge_base, path: str | Path = REFINEMENT_FILE) -> bool:
    """True when ``data`` (a parsed ``refinement.json``; ``program.app.compiled.refinement_for``
    reads the file) says ``knowledge_base``'s passages are read refined.

    Returns False for a knowledge base it does not name, or one whose ``corpus_key`` cannot be
    computed.

    Raises:
        ValueError: the knowledge base's entry's ``refine_passages`` is not a boolean (one line
            naming ``path``).
    """
    try:
        key = corpus_key(knowledge_base)
    except (AttributeError, KeyError, TypeError):  # a search-only object: no identity to look up
        return False
    by_corpus = data.get("by_corpus")
    entry = by_corpus.get(key) if isinstance(by_corpus, dict) else None
    if entry is None:
        return False
    value = entry.get("refine_passages") if isinstance(entry, dict) else None
    if not isinstance(value, bool):
        raise ValueError(f"{path}: by_corpus.{key}.refine_passages must be true or false, got {value!r}")
    return value


def save_refinement(directory: str | Path, by_corpus: dict[str, dict]) -> Path:
    """Write ``by_corpus`` (``corpus_key`` -> its measurement with ``recall`` in [0, 1]) to
    ``<directory>/refinement.json``, each entry's ``refine_passages`` set from ``MIN_RECALL``;
    all or nothing (``program.atomic``). Returns the path."""
    entries = {key: {**entry, "refine_passages": entry["recall"] >= MIN_RECALL} for key, entry in by_corpus.items()}
    return write_atomic(Path(directory) / REFINEMENT_FILE,
                        json.dumps({"min_recall": MIN_RECALL, "by_corpus": entries}, indent=1) + "\n")
