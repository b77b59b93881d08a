"""Build the program for an evaluation mode: ``closed``, ``rag`` or ``crag``."""

from __future__ import annotations

from pathlib import Path

from program import resources
from program.baselines import ClosedBook, VanillaRAG
from program.compiled import COMPILED_DIR, has_compiled, load_compiled
from program.crag import CRAG

MODES = ("closed", "rag", "crag")


def build_program(mode: str, *, compiled_dir: str | Path | None = COMPILED_DIR, knowledge_base=None,
                  web="snapshot", **settings):
    """Return a module whose ``(question=...)`` call gives a ``CRAGResult``.

    ``crag`` loads the compiled prompts and thresholds from ``compiled_dir`` when present
    (uncompiled signatures and default thresholds otherwise); ``rag`` shares the compiled
    answer generator, so the two modes differ only by CRAG's corrections.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if mode == "closed":
        return ClosedBook()
    kb = knowledge_base if knowledge_base is not None else resources.knowledge_base()
    if compiled_dir and has_compiled(compiled_dir):
        crag = load_compiled(compiled_dir, knowledge_base=kb, web=web, **settings)
    else:
        backend = resources.web_backend(web) if isinstance(web, str) or web is None else web
        crag = CRAG(kb, web=backend, embedder=resources.embedder(), **settings)
    if mode == "crag":
        return crag
    rag = VanillaRAG(kb, k=crag.k)
    rag.generator = crag.generator
    return rag
