"""Build the program for an evaluation mode: ``closed``, ``rag``, ``crag``, ``self-crag`` or ``langgraph``."""

from __future__ import annotations

from pathlib import Path

from program.app import resources
from program.app.compiled import COMPILED_DIR, has_compiled
from program.app.configuration import load_compiled
from program.stages.baselines import ClosedBook, LangGraphCRAG, VanillaRAG

MODES = ("closed", "rag", "crag", "self-crag", "langgraph")
CRAG_MODES = ("crag", "self-crag")  # the modes the retrieval decider applies to


def build_program(mode: str, *, compiled_dir: str | Path | None = COMPILED_DIR, knowledge_base=None,
                  web="default", decide_retrieval: bool = False, **settings):
    """Return a module whose ``(question=...)`` call gives a ``CRAGResult``.

    ``web`` is a backend name (``snapshot``, ``searxng``, ``wikipedia``, ... ``none``), a
    ``program.web.WebConfig``, a backend object, or None (see ``program.app.resources.resolve_web``);
    ``"default"``: the snapshot for the PopQA knowledge base, no web for any other.

    ``self-crag`` is the whole program: CRAG plus Self-RAG's claim-level support check;
    ``crag`` is the same program without that check (evaluator, actions, refinement, web).
    Both load the compiled prompts and thresholds from ``compiled_dir`` when present
    (uncompiled signatures and default thresholds otherwise); ``rag`` shares the compiled
    answer generator, so the two modes differ only by CRAG's corrections.

    ``langgraph`` is LangGraph's CRAG tutorial (``program.stages.baselines.LangGraphCRAG``): the same
    knowledge base and ``k``, the same web backend as ``crag`` (``web``) and the compiled answer generator shared as
    for ``rag``; its binary grader and
    web-search rewriter are the tutorial's prompts, uncompiled.

    ``decide_retrieval`` turns on Self-RAG's "retrieve or not" step (``DecideRetrieval``) in
    ``crag`` and ``self-crag``; ``closed``, ``rag`` and ``langgraph`` ignore it.

    Raises:
        ValueError: unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if mode == "closed":
        return ClosedBook()
    kb = knowledge_base if knowledge_base is not None else resources.knowledge_base()
    settings["decide_retrieval"] = decide_retrieval and mode in CRAG_MODES
    settings["self_check"] = mode == "self-crag"
    crag = load_compiled(compiled_dir if compiled_dir and has_compiled(compiled_dir) else None, knowledge_base=kb,
                         web=web, **settings)  # resolve() merges every layer, compiled or not
    if mode in CRAG_MODES:
        return crag
    # the compiled reader and the same support judge: the modes differ only before the reader
    shared = {"generator": crag.generator, "judges": crag.judges}
    if mode == "langgraph":
        return LangGraphCRAG(kb, web=crag.web_searcher.backend, k=crag.settings.k, **shared)
    # rag's answers are scored as crag scores its drafts
    return VanillaRAG(kb, k=crag.settings.k, confidence=crag.confidence, **shared)
