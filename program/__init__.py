"""Corrective RAG with Self-RAG checks, as a compiled DSPy program.

Public surface: ``load_compiled()`` for apps, the result type ``CRAGResult``, the module
``CRAG``, and the CLI (``python -m program ask|index``).
"""

from program.types import FALLBACK_ANSWER, Action, CRAGResult


def load_compiled(*args, **kwargs):
    """Build the CRAG program with its compiled prompts and thresholds (see ``program.compiled.load_compiled``)."""
    from program.compiled import load_compiled as _load

    return _load(*args, **kwargs)


__all__ = ["FALLBACK_ANSWER", "Action", "CRAGResult", "load_compiled"]
