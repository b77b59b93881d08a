"""The embedded offline defaults: the PopQA knowledge base and the web snapshot.

Indexes are built on first use into the state folder (``program.paths.state_root``: ``--state``,
``$CRAG_STATE_DIR``, else the cache) and reused while the source files are unchanged.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from program.app.flags import kb_setting
from program.paths import (DEFAULT_KB_SOURCE, DEFAULT_WEB_SNAPSHOT, POPQA_DIR, PROJECT_ROOT, cache_root,  # noqa: F401
                           state_root)
from program.retrieval import KnowledgeBase, get_embedder
from program.retrieval.embedder_choice import knowledge_base_embedder
from program.retrieval.postgres.url import is_database_url
from program.web.config import WebConfig
from program.web.registry import build_backend


def index_dir_for(source: Path) -> Path:
    """The folder for the index of ``source``: ``<state>/indexes/<name>-<hash of path>``
    (``program.paths.state_root``: ``--state``, ``$CRAG_STATE_DIR``, else the cache)."""
    try:
        resolved = Path(source).resolve()
    except (OSError, RuntimeError):  # a symlink loop: the corpus loader names it
        resolved = Path(os.path.abspath(source))
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    return state_root() / "indexes" / f"{Path(source).stem}-{digest}"


def kb_location(flag: str | None) -> str | None:
    """Where the command line's knowledge base is: the ``--kb`` flag, else ``$CRAG_KB``, else None
    (the default PopQA knowledge base).

    Raises:
        program.app.flags.SetupError: ``--kb ""`` or ``CRAG_KB`` set but empty (``flags.kb_setting``)."""
    return kb_setting(flag)


def knowledge_base(source: str | Path | None = None, index_dir: str | Path | None = None, *,
                   other_embedder: str = "refuse"):
    """The knowledge base at ``source``: a ``postgresql://...?table=NAME`` URL opens that pgvector
    knowledge base (already indexed); a corpus file or folder builds or reuses its faiss index
    (default: the PopQA knowledge base), with ``--embedder`` / ``CRAG_EMBEDDER``'s embedder
    (``program.retrieval.embedder_choice.knowledge_base_embedder``), else the in-process MiniLM.
    A saved index built by another embedder is refused (``other_embedder="refuse"``, what a
    question needs) or rebuilt (``"rebuild"``, what ``index`` does).

    Returns a ``program.retrieval.KnowledgeBase`` or ``program.retrieval.postgres.PgVectorKnowledgeBase``.

    Raises:
        program.retrieval.CorpusError: an unreadable or empty corpus.
        program.retrieval.KnowledgeBaseError: a database knowledge base that is missing, was built
            with another embedding model, or cannot be reached (one-line messages).
        program.retrieval.EmbeddingError: a served embedder failed (one line naming its endpoint).
        ValueError: a malformed database URL or ``CRAG_EMBEDDER``.
    """
    embedder = knowledge_base_embedder()  # --embedder / CRAG_EMBEDDER, else the in-process MiniLM
    if is_database_url(source):
        return KnowledgeBase.connect(source, embedder)
    source = Path(source) if source else DEFAULT_KB_SOURCE
    return KnowledgeBase.build(source, Path(index_dir) if index_dir else index_dir_for(source), embedder,
                               other_embedder=other_embedder)


def web_backend(name: str | None = "snapshot", snapshot: str | Path | None = None, config=None):
    """The search backend for the web path (CRAG §4.3), by name.

    Args:
        name: ``snapshot`` (offline, default), ``searxng``, ``duckduckgo``, ``wikipedia``,
            ``tavily``, ``serper``, ``brave``; ``none``, ``off`` or None for no web.
        snapshot: the JSONL pages of the ``snapshot`` backend (default the PopQA snapshot).
        config: a ``program.web.WebConfig`` for the rest (endpoints, keys, limits, safety,
            scope); default ``WebConfig.from_env()`` (``SEARXNG_URL``, ``TAVILY_API_KEY``...).
            ``name`` overrides its ``backend``.

    Returns:
        The backend (with the config as its ``config`` attribute), or None.

    Raises:
        ValueError: an unknown backend name.
        program.web.WebSearchError: the backend cannot be set up (a missing API key, no
            SearXNG URL, no snapshot file); the message names the backend and what to set.
    """
    if name in (None, "none", "off"):
        return None
    changes = {"backend": name, **({"snapshot_path": str(snapshot)} if snapshot else {})}
    config = config.with_(**changes) if config is not None else WebConfig.from_env(**changes)
    return build_backend(config)


DEFAULT_WEB = "default"


def is_popqa(knowledge_base) -> bool:
    """Whether ``knowledge_base`` is the embedded PopQA knowledge base: None (its stand-in), its
    corpus path, or a faiss knowledge base built from it."""
    if knowledge_base is None:
        return True
    if isinstance(knowledge_base, (str, Path)):
        source = str(knowledge_base)
    else:
        source = str((getattr(knowledge_base, "manifest", None) or {}).get("source_path", ""))
    try:
        return bool(source) and Path(source).resolve() == DEFAULT_KB_SOURCE.resolve()
    except (OSError, RuntimeError):
        return False


def default_web(knowledge_base) -> str:
    """The web behind ``knowledge_base`` when nobody names one: the offline PopQA snapshot for the
    PopQA knowledge base (its pages are about the same people and places), ``none`` for any
    other. A team's own documents get no Wikipedia paragraphs about other things unless
    ``--web`` or ``CRAG_WEB`` asks for a web."""
    return "snapshot" if is_popqa(knowledge_base) else "none"


def resolve_web(web, knowledge_base=None):
    """A backend from what callers pass as ``web``: ``"default"`` (:func:`default_web` of
    ``knowledge_base``, unless ``$CRAG_WEB`` names one), a name or None (``web_backend``), a
    ``WebConfig`` (``program.web.registry.build_backend``), or a backend object (returned as is)."""
    if web == DEFAULT_WEB:
        web = os.environ.get("CRAG_WEB") or default_web(knowledge_base)
    if web is None or isinstance(web, str):
        return web_backend(web)
    if isinstance(web, WebConfig):
        return build_backend(web)
    return web


def web_name(backend) -> str:
    """A web backend's name for messages and traces: its configuration's backend name, else its
    ``name``; ``"none"`` for no web."""
    if backend is None:
        return "none"
    return getattr(getattr(backend, "config", None), "backend", None) or getattr(backend, "name", "none")


def embedder():
    """The shared all-MiniLM-L6-v2 embedder (loaded once): the judges' and the refiner's, whatever
    embedder the knowledge base uses (``program.retrieval.embedder_choice.knowledge_base_embedder``)."""
    return get_embedder()
