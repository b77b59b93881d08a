"""The embedded offline defaults: the PopQA knowledge base and the web snapshot.

Indexes are built on first use into the cache folder (``$CRAG_CACHE_DIR`` or ``.cache``)
and reused while the source files are unchanged.
"""

from __future__ import annotations

from pathlib import Path

from program.model_files import cache_root

PROJECT_ROOT = Path(__file__).resolve().parent.parent
POPQA_DIR = PROJECT_ROOT / "eval_sets" / "popqa"
DEFAULT_KB_SOURCE = POPQA_DIR / "knowledge_base.jsonl"
DEFAULT_WEB_SNAPSHOT = POPQA_DIR / "web_snapshot.jsonl"


def index_dir_for(source: Path) -> Path:
    """The cache folder for the index of ``source``: ``<cache>/indexes/<name>-<hash of path>``."""
    import hashlib

    digest = hashlib.sha256(str(Path(source).resolve()).encode()).hexdigest()[:10]
    return cache_root() / "indexes" / f"{Path(source).stem}-{digest}"


def knowledge_base(source: str | Path | None = None, index_dir: str | Path | None = None):
    """Build or reuse the knowledge base over ``source`` (default: the PopQA knowledge base).

    Returns a ``program.retrieval.KnowledgeBase``. Raises ``program.retrieval.CorpusError``
    for an unreadable or empty corpus.
    """
    from program.retrieval import KnowledgeBase

    source = Path(source) if source else DEFAULT_KB_SOURCE
    return KnowledgeBase.build(source, Path(index_dir) if index_dir else index_dir_for(source))


def web_backend(name: str | None = "snapshot", snapshot: str | Path | None = None):
    """The search backend for the web path: ``snapshot`` (offline, default) or ``none``."""
    if name in (None, "none", "off"):
        return None
    if name == "snapshot":
        from program.web.snapshot import OfflineSnapshotBackend

        return OfflineSnapshotBackend(Path(snapshot) if snapshot else DEFAULT_WEB_SNAPSHOT)
    raise ValueError(f"unknown web backend {name!r}; available: snapshot, none")


def embedder():
    """The shared all-MiniLM-L6-v2 embedder (loaded once)."""
    from program.retrieval import get_embedder

    return get_embedder()
