"""Where the project's own files are: its root, the compiled program, the cache, the PopQA data.

The one place that computes the project root (the folder holding ``program/``); everything that
names a project file starts here.
"""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
POPQA_DIR = PROJECT_ROOT / "eval_sets" / "popqa"
DEFAULT_KB_SOURCE = POPQA_DIR / "knowledge_base.jsonl"
DEFAULT_WEB_SNAPSHOT = POPQA_DIR / "web_snapshot.jsonl"


def cache_root() -> Path:
    """The project's cache folder: ``$CRAG_CACHE_DIR``, else ``<project>/.cache``."""
    env = os.environ.get("CRAG_CACHE_DIR")
    return Path(env) if env else PROJECT_ROOT / ".cache"
