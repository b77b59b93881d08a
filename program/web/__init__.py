"""Web search for CRAG's INCORRECT/AMBIGUOUS path: one protocol, one file per backend."""

from program.web.base import SearchBackend, SearchHit, WebSearchError
from program.web.snapshot import OfflineSnapshotBackend, default_cache_dir

__all__ = ["SearchBackend", "SearchHit", "WebSearchError", "OfflineSnapshotBackend", "default_cache_dir"]
