"""Judges adapted to one knowledge base, kept beside the compile: ``<compiled>/adapted/<corpus_key>/judges.json``.

ARES (Saad-Falcon et al. 2024, §3) fits its judges per domain from questions written for the
domain's own passages. ``python -m optimize.compile --kb PATH`` (or ``python -m program index``)
does that here (``program.adaptation.adapt``) and saves the result under the knowledge base's
``corpus_key``: the sha256 of its files' hashes, so a changed document makes another key and the
old judges are no longer picked. ``load_compiled`` picks the adapted judges whenever their
knowledge base is the one in use; other knowledge bases get the compile's own judges.

The file is one ``judges.json`` written atomically (``save_judges``), its ``adapted`` entry
saying what it was built from, so a kill mid-write leaves the previous adaptation in place.
"""

from __future__ import annotations

from pathlib import Path

from program.judges.store import JudgeSet, corpus_key, load_judges

ADAPTED_DIR = "adapted"


def adapted_dir(compiled_dir: str | Path, knowledge_base) -> Path | None:
    """``<compiled_dir>/adapted/<corpus_key>``, or None for a knowledge base with no manifest."""
    try:
        return Path(compiled_dir) / ADAPTED_DIR / corpus_key(knowledge_base)
    except (AttributeError, KeyError, TypeError):
        return None


def load_adapted(compiled_dir: str | Path, knowledge_base) -> JudgeSet | None:
    """The judges adapted to ``knowledge_base`` under ``compiled_dir``, or None when it has none.

    Raises:
        program.judges.JudgesFileError: the saved file is unreadable (the message names it).
    """
    folder = adapted_dir(compiled_dir, knowledge_base)
    if folder is None:
        return None
    judges = load_judges(folder)
    if judges is None or not judges.adapted:
        return None
    return judges


__all__ = ["ADAPTED_DIR", "adapted_dir", "load_adapted"]
