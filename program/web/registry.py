"""Backend names → search backends, built from one ``WebConfig``.

``build_backend(WebConfig.from_env(backend="searxng", searx_url=...))`` is how the CLI, the
factory and ``load_compiled`` get a backend. Each backend module is imported only when chosen.
"""

from __future__ import annotations

from importlib import import_module

from program.paths import DEFAULT_WEB_SNAPSHOT
from program.web.config import BACKEND_NAMES, WebConfig

# name -> (module, class); the snapshot is built by ``_snapshot`` (it takes a file, not a service)
BACKENDS = {
    "searxng": ("program.web.searxng", "SearxngBackend"),
    "duckduckgo": ("program.web.duckduckgo", "DuckDuckGoBackend"),
    "wikipedia": ("program.web.wikipedia", "WikipediaBackend"),
    "tavily": ("program.web.tavily", "TavilyBackend"),
    "serper": ("program.web.serper", "SerperBackend"),
    "brave": ("program.web.brave", "BraveBackend"),
}


def _snapshot(config: WebConfig):
    # the snapshot backend pulls in the retrieval stack (faiss, embeddings): only when it is chosen
    from program.web.snapshot import OfflineSnapshotBackend

    return OfflineSnapshotBackend(config.snapshot_path or DEFAULT_WEB_SNAPSHOT, config=config)


def build_backend(config: WebConfig | None = None):
    """The search backend ``config.backend`` names, or None for ``none``.

    Args:
        config: default ``WebConfig.from_env()`` (so ``CRAG_WEB`` and the key variables apply).

    Returns:
        A ``SearchBackend`` whose ``config`` attribute is ``config`` (the web path reads the
        fetch limits, safety settings and domain scope from it), or None.

    Raises:
        WebSearchError: the backend cannot be set up: a missing API key (``TAVILY_API_KEY is
            not set``), no SearXNG URL, a missing snapshot file. The message names the backend
            and what to set.
        ValueError: an unknown backend name (``WebConfig`` checks it).
    """
    config = config or WebConfig.from_env()
    if config.backend == "none":
        return None
    if config.backend == "snapshot":
        return _snapshot(config)
    module, cls = BACKENDS[config.backend]
    return getattr(import_module(module), cls)(config)


__all__ = ["BACKENDS", "BACKEND_NAMES", "build_backend"]
