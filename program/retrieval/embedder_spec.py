"""How a served embedder is named and set: the ``--embedder`` / ``$CRAG_EMBEDDER`` spec
(``BASE_URL#MODEL`` or ``local``) and its settings (``CRAG_EMBEDDER_BATCH`` and the like),
checked at start so a bad value is one line before anything is contacted
(:mod:`program.retrieval.served_embedder` uses them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from program.env import env_number

BATCH = 32  # texts per request: Text Embeddings Inference refuses more than its --max-client-batch-size, 32 by default
CONCURRENCY = 4  # requests in flight per process: enough to hide a server's latency, few enough not to flood it
TIMEOUT = 60.0  # seconds per request: a CPU-only server takes seconds a batch (64 chunks: 8 s in-process here)
SPEC_FORM = "BASE_URL#MODEL (e.g. http://127.0.0.1:8080/v1#BAAI/bge-small-en-v1.5) or 'local'"
LOCAL = "local"  # the spec of the in-process all-MiniLM-L6-v2, the default


@dataclass(frozen=True)
class EmbedderSpec:
    """A served embedder's address and model: ``base_url`` (no trailing ``/embeddings``) and ``model``."""

    base_url: str
    model: str


def parse_spec(text: str | None) -> EmbedderSpec | None:
    """``BASE_URL#MODEL`` as an :class:`EmbedderSpec`; None for None, ``""`` or ``local`` (the
    in-process all-MiniLM-L6-v2). A base URL ending in ``/embeddings`` (the endpoint itself) is
    accepted and cut back to its base.

    Raises:
        ValueError: anything else (the message gives the form, not the flag's name).
    """
    text = (text or "").strip()
    if not text or text == LOCAL:
        return None
    base, _, model = text.partition("#")
    parts = urlsplit(base)
    if (parts.scheme not in ("http", "https") or not parts.hostname or not model.strip()
            or any(c.isspace() for c in text) or parts.query):
        raise ValueError(f"must be {SPEC_FORM}, got {text!r}")
    base = base.rstrip("/")
    if base.endswith("/embeddings"):
        base = base[: -len("/embeddings")]
    return EmbedderSpec(base, model.strip())


def settings_from_env() -> dict:
    """The served embedder's settings from the environment: ``batch_size``
    (``CRAG_EMBEDDER_BATCH``, 1..2048), ``concurrency`` (``CRAG_EMBEDDER_CONCURRENCY``, 1..64),
    ``timeout`` (``CRAG_EMBEDDER_TIMEOUT``, seconds, 0.1..3600) and ``api_key``
    (``CRAG_EMBEDDER_API_KEY``, or None). Raises ValueError (one line naming the variable)."""
    return {"batch_size": env_number("CRAG_EMBEDDER_BATCH", BATCH, 1, 2048),
            "concurrency": env_number("CRAG_EMBEDDER_CONCURRENCY", CONCURRENCY, 1, 64),
            "timeout": env_number("CRAG_EMBEDDER_TIMEOUT", TIMEOUT, 0.1, 3600, float),
            "api_key": os.environ.get("CRAG_EMBEDDER_API_KEY") or None}
