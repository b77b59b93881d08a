"""The reader's words as the embedded model writes them, for a stream that shows them at once.

The service sets a sink for its question (``words_to``); the answer generator marks its own
calls (``reading``); the embedded engine (``program.lm.configure.LlamaCppEngine``) then streams
those calls and hands the text of their ``answer`` field to the sink, piece by piece, without
DSPy's field markers. Other calls (judges, claims, rewrites) and served models are not streamed:
their result arrives whole, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_SINK: ContextVar[Callable[[str], None] | None] = ContextVar("crag_words_sink", default=None)
_READING: ContextVar[bool] = ContextVar("crag_reading", default=False)


@contextmanager
def words_to(sink: Callable[[str], None]) -> Iterator[None]:
    """Send the reader's words written inside the block to ``sink`` (one call per piece)."""
    token = _SINK.set(sink)
    try:
        yield
    finally:
        _SINK.reset(token)


@contextmanager
def reading() -> Iterator[None]:
    """Mark the LM calls inside the block as the reader's: their answer is streamed to the sink."""
    token = _READING.set(True)
    try:
        yield
    finally:
        _READING.reset(token)


def current_sink() -> Callable[[str], None] | None:
    """The sink for this call: set, and the call is the reader's; else None (the call is not streamed)."""
    return _SINK.get() if _READING.get() else None


class FieldText:
    """Feed it an LM's raw output piece by piece; it passes on only the text of one output field:
    what follows ``[[ ## answer ## ]]`` up to the next ``[[ ##`` marker, stripped of the line
    break after the marker. Pieces that might start a marker are held until they cannot."""

    def __init__(self, emit: Callable[[str], None], field: str = "answer"):
        self.emit, self.marker = emit, f"[[ ## {field} ## ]]"
        self.buffer, self.inside, self.done, self.started = "", False, False, False

    def feed(self, piece: str) -> None:
        if self.done or not piece:
            return
        self.buffer += piece
        if not self.inside:
            at = self.buffer.find(self.marker)
            if at < 0:
                return
            self.buffer, self.inside = self.buffer[at + len(self.marker):], True
        end = self.buffer.find("[[")
        if end >= 0:
            self._send(self.buffer[:end].rstrip())
            self.buffer, self.done = "", True
            return
        keep = len(self.buffer) - len(self.buffer.rstrip("[ \n"))  # a marker may be starting
        self._send(self.buffer[:len(self.buffer) - keep])
        self.buffer = self.buffer[len(self.buffer) - keep:]

    def _send(self, text: str) -> None:
        if not self.started:
            text = text.lstrip("\n ")
        if text:
            self.started = True
            self.emit(text)
