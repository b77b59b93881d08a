"""Web search for CRAG's INCORRECT/AMBIGUOUS path (CRAG §4.3): one protocol, one file per backend.

Backends (``program.web.registry.build_backend``): ``snapshot`` (offline), ``searxng``,
``duckduckgo``, ``wikipedia``, ``tavily``, ``serper``, ``brave``. Around them: ``config``
(``WebConfig``), ``transport`` (the shared HTTP layer), ``fetch`` (pages), ``extract`` (main
text), ``safety`` (no internal addresses), ``scope`` (allowed and blocked domains).
"""

from program.web.base import SearchBackend, SearchHit, WebSearchError
from program.web.config import BACKEND_NAMES, WebConfig

_LAZY = {  # these pull in the retrieval stack (faiss, embeddings): imported on first use
    "OfflineSnapshotBackend": "program.web.snapshot",
    "default_cache_dir": "program.web.snapshot",
    "build_backend": "program.web.registry",
}


def __getattr__(name):
    if name in _LAZY:
        from importlib import import_module  # only for the lazy names above

        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'program.web' has no attribute {name!r}")


__all__ = ["BACKEND_NAMES", "SearchBackend", "SearchHit", "WebConfig", "WebSearchError",
           "OfflineSnapshotBackend", "build_backend", "default_cache_dir"]
