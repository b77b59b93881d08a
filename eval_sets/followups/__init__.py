"""Hand-written follow-ups over the labeled domains (``README.md``): a conversation's last message,
the standalone question a reader would write for it, and the labeled question both ask."""

from __future__ import annotations

import json
from pathlib import Path

FOLLOWUPS = Path(__file__).with_name("followups.jsonl")
SPLITS = ("train", "dev", "test")


def load_rows(domain: str | None = None, split: str | None = None) -> list[dict]:
    """The rows of ``domain`` (a labeled domain's folder name; None: all) in ``split`` (None: all).

    Raises:
        ValueError: ``split`` is not train, dev or test."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; expected one of: {', '.join(SPLITS)}")
    rows = [json.loads(line) for line in FOLLOWUPS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if (domain is None or r["domain"] == domain) and (split is None or r["split"] == split)]


def history(row: dict) -> list[tuple[str, str]]:
    """The row's earlier turns as ``(role, text)`` pairs, oldest first."""
    return [(turn["role"], turn["content"]) for turn in row["history"]]
