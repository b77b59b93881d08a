"""Where the project's own files are: its root, the compiled program, the cache, the PopQA data.

The one place that computes the project root (the folder holding ``program/``); everything that
names a project file starts here. Run from a clone (or an editable install), the root is the
clone and the committed compile is its ``compiled/``; installed from a wheel (``pip install .``),
the root is the environment's site-packages, the compile the wheel's copy in
``<environment>/share/crag-dspy/compiled``, and the cache ``~/.cache/crag-dspy``. Nothing is
ever written under the install prefix: indexes and what is learned about a knowledge base live in
the state folder (:func:`state_root`), the model files and the LM cache in the cache.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
IN_CLONE = (PROJECT_ROOT / "pyproject.toml").is_file()
POPQA_DIR = PROJECT_ROOT / "eval_sets" / "popqa"
DEFAULT_KB_SOURCE = POPQA_DIR / "knowledge_base.jsonl"
DEFAULT_WEB_SNAPSHOT = POPQA_DIR / "web_snapshot.jsonl"
COMPILED_DIR = PROJECT_ROOT / "compiled" if IN_CLONE else Path(sys.prefix) / "share" / "crag-dspy" / "compiled"


def cache_root() -> Path:
    """The cache folder: ``$CRAG_CACHE_DIR``, else ``<clone>/.cache``, else (installed)
    ``$XDG_CACHE_HOME/crag-dspy`` (``~/.cache/crag-dspy``)."""
    env = os.environ.get("CRAG_CACHE_DIR")
    if env:
        return Path(env)
    if IN_CLONE:
        return PROJECT_ROOT / ".cache"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "crag-dspy"


def state_root() -> Path:
    """The state folder: the knowledge bases' indexes and what was learned about each (adapted
    judges, operating point, reader demo, the rows they were fit on). ``$CRAG_STATE_DIR`` (the
    ``--state`` flag sets it), else the cache folder (:func:`cache_root`): per user, never the
    install prefix."""
    env = os.environ.get("CRAG_STATE_DIR")
    return Path(env) if env else cache_root()
