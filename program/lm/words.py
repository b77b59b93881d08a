"""The reader's words as the model writes them, for a stream that shows them at once.

The service sets a sink for its question (``words_to``); the answer generator marks its own
calls (``reading``). The embedded engine (``program.lm.configure.LlamaCppEngine``) then streams
those calls itself; a served model's are streamed by DSPy (``settings.send_stream``, the stream
``dspy.streamify`` uses), its chunks read by ``ChunkText``. Either way the sink receives the text
of the ``answer`` field piece by piece, without DSPy's field markers. Other calls (judges,
claims, rewrites) are not streamed: their result arrives whole, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import dspy
from anyio.from_thread import threadlocals

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
    """Mark the LM calls inside the block as the reader's: their answer is streamed to the sink.

    With a sink and a served model, DSPy streams the calls (``settings.send_stream``) to a
    ``ChunkText``; only inside an AnyIO worker thread (the service's), where DSPy's stream can
    reach its event loop: elsewhere the calls are made as they would be without a sink."""
    token = _READING.set(True)
    try:
        sink, lm = _SINK.get(), dspy.settings.lm
        if sink is None or lm is None or getattr(lm_engine(lm), "streams_words", False) or not in_worker_thread():
            yield
        else:
            with dspy.settings.context(send_stream=ChunkText(sink)):
                yield
    finally:
        _READING.reset(token)


def lm_engine(lm) -> object:
    """A ``dspy.LM``'s engine: a custom one's object (the embedded model's), else its name."""
    return getattr(lm, "engine", None)


def in_worker_thread() -> bool:
    """True in a thread AnyIO started (``anyio.to_thread.run_sync``), which can call back into
    its event loop; DSPy's stream sends each chunk there (``anyio.from_thread.run``)."""
    return hasattr(threadlocals, "current_token")


def current_sink() -> Callable[[str], None] | None:
    """The sink for this call: set, and the call is the reader's; else None (the call is not streamed)."""
    return _SINK.get() if _READING.get() else None


class ChunkText:
    """The stream DSPy sends a served model's chunks to (``settings.send_stream``): each chunk's
    ``choices[0].delta.content`` fed to a ``FieldText`` of the answer field; chunks of
    another kind (DSPy's status messages) are passed over."""

    def __init__(self, sink: Callable[[str], None]):
        self.field = FieldText(sink)

    async def send(self, chunk) -> None:
        for choice in getattr(chunk, "choices", None) or []:
            delta = getattr(choice, "delta", None)
            self.field.feed(getattr(delta, "content", None) or "")


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
