"""Which embedder the knowledge bases embed their chunks and queries with, process-wide.

Two roles, two functions: ``program.retrieval.embedding.get_embedder`` is always the in-process
all-MiniLM-L6-v2, the one the trained judges' features were computed with (the instruction
judge reads its 384 numbers; the other judges its cosines), whatever the knowledge base uses.
:func:`knowledge_base_embedder` is the knowledge bases' own: the one ``--embedder`` set
(:func:`configure_embedder`, called by the command line before the knowledge base loads), else
``$CRAG_EMBEDDER``'s, else that same in-process model. A spec is ``BASE_URL#MODEL`` of an
OpenAI-compatible embeddings server (:mod:`program.retrieval.served_embedder`) or ``local``.

:func:`embedding_mismatch` says in words why an embedder cannot search an index recorded with
another (a manifest's ``embedding``), for the knowledge bases' one-line refusals.
"""

from __future__ import annotations

import os
import threading

from program.retrieval.embedding import get_embedder

_lock = threading.Lock()
_configured = None  # set by configure_embedder; None: $CRAG_EMBEDDER decides
_from_env: dict = {}  # spec -> the served embedder built for it (one client and one probe per process)


def embedder_for(spec: str | None):
    """The embedder a spec names: ``BASE_URL#MODEL`` a new ``ServedEmbedder`` (its settings from
    the environment); None, ``""`` or ``local`` the in-process one (``get_embedder``).

    Raises:
        ValueError: a malformed spec or served-embedder setting (one line, without the flag's name).
    """
    return _served(spec) or get_embedder()


def _served(spec: str | None):
    """The ``ServedEmbedder`` of ``spec``, or None for the in-process one. Raises ValueError."""
    # lazy on purpose: httpx loads only when a served embedder is asked for
    from program.retrieval.embedder_spec import parse_spec
    from program.retrieval.served_embedder import ServedEmbedder

    return None if parse_spec(spec) is None else ServedEmbedder.from_spec(spec)


def configure_embedder(spec: str | None) -> None:
    """Make ``spec``'s embedder (:func:`embedder_for`) the knowledge bases' for this process, as
    ``--embedder`` asks; None goes back to ``$CRAG_EMBEDDER``. Nothing is contacted or loaded yet.

    Raises:
        ValueError: a malformed spec or setting.
    """
    global _configured
    embedder = None if spec is None else embedder_for(spec)
    with _lock:
        _configured = embedder


def knowledge_base_embedder():
    """The embedder knowledge bases embed chunks and queries with: the one :func:`configure_embedder`
    set, else ``$CRAG_EMBEDDER``'s (built once per value), else ``get_embedder()``.

    Raises:
        ValueError: ``$CRAG_EMBEDDER`` or a served-embedder setting is malformed.
    """
    spec = os.environ.get("CRAG_EMBEDDER", "").strip()
    with _lock:
        if _configured is not None:
            return _configured
        if spec not in _from_env:
            try:
                _from_env[spec] = _served(spec)  # built, not contacted
            except ValueError as exc:  # the spec's own message does not name the variable
                raise ValueError(f"CRAG_EMBEDDER {exc}" if str(exc).startswith("must be") else str(exc)) from None
        found = _from_env[spec]
    return found if found is not None else get_embedder()


def embedding_mismatch(recorded: dict | None, embedder) -> str | None:
    """Why ``embedder`` cannot search what was embedded as ``recorded`` (a manifest's
    ``embedding``: ``model``, ``dimensions``), e.g. ``"built with 'A' (384d), not 'B'"``; None
    when they match. The names are compared first: a served embedder of another name is not
    asked for its dimension.

    Raises:
        EmbeddingError: a served embedder with the recorded name cannot be reached for its dimension.
    """
    recorded = recorded or {}
    model, dims = recorded.get("model"), recorded.get("dimensions")
    if embedder.name != model:
        return f"built with {model!r} ({dims}d), not {embedder.name!r}"
    if embedder.dimensions != dims:
        return f"built with {model!r} ({dims}d), not {embedder.name!r} ({embedder.dimensions}d)"
    return None
