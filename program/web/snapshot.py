"""Offline stand-in for web search: semantic search over a local JSONL snapshot of pages.

Each snapshot row is a page ``{"url": str, "title": str, "paragraphs": [str, ...]}``
(e.g. ``eval_sets/popqa/web_snapshot.jsonl``). Pages are chunked, embedded and indexed with
:class:`program.retrieval.KnowledgeBase`; the index is cached on disk and reused while the
snapshot is unchanged. Results are per page: the chunks of one page are merged into one hit.
"""

from __future__ import annotations

import threading
from pathlib import Path

from program.paths import PROJECT_ROOT, cache_root  # noqa: F401 (PROJECT_ROOT re-exported)
from program.retrieval import CorpusError, KnowledgeBase, KnowledgeBaseError, load_documents
from program.retrieval.embedding import Embedder, EmbeddingError
from program.web.base import SearchHit, WebSearchError


def default_cache_dir() -> Path:
    """Cache root: ``$CRAG_CACHE_DIR`` if set, else ``<project>/.cache`` (``program.lm.model_files.cache_root``)."""
    return cache_root()


class OfflineSnapshotBackend:
    """Search a JSONL page snapshot as if it were the web.

    Args:
        snapshot_path: the JSONL file of pages.
        index_dir: where the page index is cached; default ``<cache>/indexes/web_snapshot``
            (see :func:`default_cache_dir`).
        embedder: embedder for pages and queries; default the shared one.

    The index is built (or reused) on the first ``search``, not in the constructor.

    Raises:
        WebSearchError: (constructor) the snapshot file does not exist.
    """

    name = "offline-snapshot"
    config = None  # a WebConfig when built by program.web.registry (carries the domain scope)

    def __init__(self, snapshot_path: str | Path, index_dir: str | Path | None = None,
                 embedder: Embedder | None = None, config=None):
        self.config = config  # a ``WebConfig``: carries the domain scope to the web path
        self.snapshot_path = Path(snapshot_path)
        if not self.snapshot_path.is_file():
            raise WebSearchError(self.name, f"snapshot file not found: {self.snapshot_path}")
        self.index_dir = Path(index_dir) if index_dir else default_cache_dir() / "indexes" / "web_snapshot"
        self._embedder = embedder
        self._kb: KnowledgeBase | None = None
        self._pages: dict[str, tuple[str, str, str]] = {}  # doc_id -> (url, title, text)
        self._lock = threading.Lock()

    def _ensure(self) -> KnowledgeBase:
        with self._lock:
            if self._kb is None:
                try:
                    kb = KnowledgeBase.build(self.snapshot_path, self.index_dir, embedder=self._embedder,
                                             with_vocabulary=False)  # pages are only searched: no terms needed
                    docs = load_documents(self.snapshot_path)
                except (CorpusError, KnowledgeBaseError, EmbeddingError, OSError) as exc:
                    raise WebSearchError(self.name, f"cannot index snapshot {self.snapshot_path}: {exc}") from exc
                self._pages = {d.doc_id: (d.url or d.doc_id, d.title, d.text) for d in docs}
                self._kb = kb
            return self._kb

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """Best ``k`` pages for ``query``, best first.

        Returns:
            Hits with ``snippet`` = the page's best-matching chunk, ``content`` = the whole page
            text (paragraphs joined with blank lines), ``url`` and ``title`` of the page.
            ``[]`` for a blank query or k <= 0.

        Raises:
            WebSearchError: the snapshot cannot be read or indexed.
        """
        if k <= 0 or not query or not query.strip():
            return []
        kb = self._ensure()
        fetch = max(4 * k, 20)
        while True:
            passages = kb.search(query, fetch)
            best: dict[str, object] = {}
            for p in passages:  # best first, so the first chunk seen per page is its best
                doc_id = p.id.rsplit("#", 1)[0]
                best.setdefault(doc_id, p)
            if len(best) >= k or fetch >= len(kb):
                break
            fetch = min(fetch * 4, len(kb))
        hits = []
        for doc_id, p in list(best.items())[:k]:
            url, title, text = self._pages.get(doc_id, (p.url, p.title, p.text))
            hits.append(SearchHit(url=url, title=title, snippet=p.text, content=text))
        return hits
