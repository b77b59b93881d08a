"""The embedded offline defaults: the PopQA knowledge base and the web snapshot.

Indexes are built on first use into the cache folder (``$CRAG_CACHE_DIR`` or ``.cache``)
and reused while the source files are unchanged.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from program.paths import DEFAULT_KB_SOURCE, DEFAULT_WEB_SNAPSHOT, POPQA_DIR, PROJECT_ROOT, cache_root  # noqa: F401
from program.retrieval import KnowledgeBase, get_embedder
from program.retrieval.postgres.url import is_database_url
from program.web.config import WebConfig
from program.web.registry import build_backend


def index_dir_for(source: Path) -> Path:
    """The cache folder for the index of ``source``: ``<cache>/indexes/<name>-<hash of path>``."""
    try:
        resolved = Path(source).resolve()
    except (OSError, RuntimeError):  # a symlink loop: the corpus loader names it
        resolved = Path(os.path.abspath(source))
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:10]
    return cache_root() / "indexes" / f"{Path(source).stem}-{digest}"


def kb_location(flag: str | None) -> str | None:
    """Where the command line's knowledge base is: the ``--kb`` flag, else ``$CRAG_KB``, else None
    (the default PopQA knowledge base)."""
    return flag or os.environ.get("CRAG_KB") or None


def knowledge_base(source: str | Path | None = None, index_dir: str | Path | None = None):
    """The knowledge base at ``source``: a ``postgresql://...?table=NAME`` URL opens that pgvector
    knowledge base (already indexed); a corpus file or folder builds or reuses its faiss index
    (default: the PopQA knowledge base).

    Returns a ``program.retrieval.KnowledgeBase`` or ``program.retrieval.postgres.PgVectorKnowledgeBase``.

    Raises:
        program.retrieval.CorpusError: an unreadable or empty corpus.
        program.retrieval.KnowledgeBaseError: a database knowledge base that is missing, was built
            with another embedding model, or cannot be reached (one-line messages).
        ValueError: a malformed database URL.
    """
    if is_database_url(source):
        return KnowledgeBase.connect(source)
    source = Path(source) if source else DEFAULT_KB_SOURCE
    return KnowledgeBase.build(source, Path(index_dir) if index_dir else index_dir_for(source))


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
    """The shared all-MiniLM-L6-v2 embedder (loaded once)."""
    return get_embedder()
