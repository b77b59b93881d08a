"""Progress bars for building a knowledge base: files read, chunks embedded, terms embedded.

Building the PopQA knowledge base embeds for minutes; without a sign of life a user cannot tell
work from a hang. :class:`BuildProgress` shows one tqdm bar per phase on stderr, each with its
count, rate and time left::

    reading files: 100%|██████████| 2/2 [00:00<00:00, 310.1 files/s]
    embedding chunks:  45%|████▌     | 2304/5120 [02:51<03:29, 13.4 chunks/s]

Shown when ``$CRAG_PROGRESS`` is ``1`` (``0`` hides it), else when stderr is a terminal, so logs
and pipes stay clean unless asked. A reused index shows nothing: there is nothing to wait for.
"""

from __future__ import annotations

import sys

import numpy as np
from tqdm import tqdm

from program.env import env_flag

EMBED_BATCH = 32  # texts per update of the bar


def progress_enabled() -> bool:
    """True when bars are shown: ``$CRAG_PROGRESS`` ``1``/``0``, else whether stderr is a terminal."""
    flag = env_flag("CRAG_PROGRESS")
    return sys.stderr.isatty() if flag is None else flag


class BuildProgress:
    """The bars of one build.

    Args:
        enabled: show the bars; None follows :func:`progress_enabled`.

    ``file_read(done, total)`` is the corpus loader's callback (``load_documents(progress=...)``);
    ``embedder(embedder, what)`` wraps an embedder so that its ``encode`` updates a bar
    (``what``: ``"chunks"`` or ``"terms"``). Disabled, both cost nothing and print nothing.
    """

    def __init__(self, enabled: bool | None = None):
        self.enabled = progress_enabled() if enabled is None else enabled
        self._files = None
        self._pages = None

    def _bar(self, total: int, desc: str, unit: str):
        return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, mininterval=0.5, dynamic_ncols=True,
                    disable=not self.enabled)

    def file_read(self, done: int, total: int) -> None:
        """``done`` of ``total`` corpus files read; the bar closes at the last one."""
        if not self.enabled:
            return
        if self._files is None:
            self._files = self._bar(total, "reading files", "files")
        self._files.update(done - self._files.n)
        if done >= total:
            self._files.close()
            self._files = None

    def page_read(self, name: str, done: int, total: int) -> None:
        """``done`` of ``total`` pages of the PDF ``name`` read; a bar only for a long one (100+ pages)."""
        if not self.enabled or total < 100:
            return
        if getattr(self, "_pages", None) is None:
            self._pages = self._bar(total, f"reading {name}", "pages")
        self._pages.update(done - self._pages.n)
        if done >= total:
            self._pages.close()
            self._pages = None

    def embedder(self, embedder, what: str) -> "ProgressEmbedder":
        """``embedder`` whose ``encode`` shows a bar of the texts it embeds (``what`` names them)."""
        return ProgressEmbedder(embedder, self, what)


class ProgressEmbedder:
    """An embedder proxy: ``encode`` embeds in batches of ``EMBED_BATCH`` and updates a bar.

    Same contract as ``Embedder.encode``: returns ``(len(texts), dimensions)`` float32.
    Every other attribute is the wrapped embedder's.
    """

    def __init__(self, embedder, progress: BuildProgress, what: str):
        self._embedder, self._progress, self._what = embedder, progress, what

    def __getattr__(self, name):
        return getattr(self._embedder, name)

    def encode(self, texts: list[str]) -> np.ndarray:
        texts = list(texts)
        if not self._progress.enabled or not texts:
            return self._embedder.encode(texts)
        if callable(getattr(self._embedder, "load", None)):
            self._embedder.load()  # before the bar: its rate and time left are the embedding's alone
        bar = self._progress._bar(len(texts), f"embedding {self._what}", self._what)
        parts = []
        # a served embedder sends its batches concurrently: a step of one batch would send them one by one
        step = max(EMBED_BATCH, getattr(self._embedder, "batch_size", 0) * getattr(self._embedder, "concurrency", 0))
        try:
            for start in range(0, len(texts), step):
                parts.append(self._embedder.encode(texts[start:start + step]))
                bar.update(len(parts[-1]))
        finally:
            bar.close()
        return np.concatenate(parts) if parts else self._embedder.encode([])
