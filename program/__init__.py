"""Corrective RAG with Self-RAG checks, as a compiled DSPy program.

Public surface: ``load_compiled()`` for apps, the result type ``CRAGResult``, the embedded
resources (``from program import resources``: ``knowledge_base(folder)`` for your documents),
and the CLI (``python -m program ask|serve|index``).

Packages: ``stages`` (the CRAG module and its stages), ``judges`` (the trained judges and which
one judges), ``retrieval`` (corpus, chunks, embeddings, faiss and pgvector knowledge bases),
``web`` (search backends, page fetching), ``lm`` (the language model), ``guards`` (question
checks, caps, cost) and ``app`` (CLI, service, compiled program, resources, tracing).
"""

from program.types import FALLBACK_ANSWER, Action, CRAGResult


def load_compiled(*args, **kwargs):
    """Build the CRAG program with its compiled prompts and thresholds, resolved once for its
    knowledge base (see ``program.app.configuration.load_compiled``)."""
    # lazy on purpose: `import program` stays light (no dspy, torch or model)
    from program.app.configuration import load_compiled as _load

    return _load(*args, **kwargs)


def __getattr__(name: str):
    # ``from program import resources`` keeps working now that it lives in program.app; imported on
    # first use so that ``import program`` stays light
    if name == "resources":
        from program.app import resources  # lazy on purpose, as load_compiled

        return resources
    raise AttributeError(f"module 'program' has no attribute {name!r}")


__all__ = ["FALLBACK_ANSWER", "Action", "CRAGResult", "load_compiled"]
