"""Step events: what the program is doing, observed through DSPy callbacks as it happens.

``StepRecorder`` is a ``dspy.utils.callback.BaseCallback``. Given to DSPy for one question
(``with dspy.context(callbacks=[recorder]): program(question=...)``), it receives the events
each step emits where it runs (``program.stages.events.emit``) as JSON-ready dicts, and counts
the LM calls DSPy reports:

=================  =========================================================================
event              data
=================  =========================================================================
question           ``question``
followup           ``asked`` (the user's last message), ``standalone`` (the question the route answers)
decide-retrieval   ``needs_retrieval`` (Self-RAG's Retrieve token)
retrieved          ``stage`` (``initial`` | ``corrected``), ``passages`` (id, title, url, source, score, text)
graded             ``stage``, ``grades`` (passage_id, score, reason, explanation), ``lower``, ``upper``
action             ``action`` (correct | ambiguous | incorrect), ``confidence`` (the draft's), ``reasons``, ``accept``,
                   ``lower``
rewrite            ``query`` (RewriteQuery's search query)
web                ``backend``, ``query``, ``hits``, ``fetched``, ``fetch_failures``, ``error``
strips             ``stage`` (``internal`` | ``corrected``), ``kept``, ``dropped``, ``threshold``
words              ``stage`` (``draft`` | ``corrected``), ``text``: a piece of the reader's answer as the embedded
                   model writes it (the service only, ``program.lm.words``)
answer             ``answer``, ``strict`` (the stricter retry), ``closed_book``; the last one,
                   once the answer is cited (``program.stages.attribution``), also ``cited`` (true),
                   ``sentences`` (text, cited, supported, by) and ``citations`` (number,
                   source_id, url, text, title, sentences)
claims             ``claims`` (text, support, cited, kept, score), ``retry``
usefulness         ``score`` (Self-RAG's IsUse, in [0, 1])
=================  =========================================================================

The caller adds the last event with ``finish`` (or ``emit``): ``result`` (``result``: the whole
``CRAGResult.to_dict()``) or ``error`` (``status``, ``detail``); the service's is always there,
a question stopped because its client went away included (``error``, status 499).

Every event also carries ``event`` (its name), ``t`` (seconds since the recorder was made),
``time`` (UTC, ISO 8601), ``lm_calls`` (LM calls so far) and, when given, ``request``.
The recorder hands each event to its sinks: a ``JsonlTrace`` (``--trace-jsonl PATH``), the
service's stream, or any callable. A sink that raises is logged by DSPy and skipped.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from dspy.utils.callback import BaseCallback


Sink = Callable[[dict], None]


def _plain(value):
    """Dataclasses (passages, grades, strips, claims) and enums as JSON-ready values."""
    if is_dataclass(value):
        return asdict(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return getattr(value, "value", value)


class StepRecorder(BaseCallback):
    """Receive one question's step events and count its LM calls (see the module docstring).

    Args:
        sinks: callables receiving each event dict, in order.
        request: an id copied into every event (the service's request id), or None.

    Use one recorder per question: it keeps the question's LM call count and whether the
    reader's words belong to the draft.
    """

    def __init__(self, *sinks: Sink, request: str | None = None):
        self.sinks = list(sinks)
        self.request = request
        self.started = time.perf_counter()
        self.lm_calls = 0
        self.events: list[dict] = []
        self._answers = 0  # answers written so far: the first one's words are the draft's
        self._delivering = threading.Lock()
        self._finished = False

    def emit(self, event: str, **data) -> dict:
        """Build the event, hand it to every sink, and return it (after ``finish``: to none)."""
        return self._deliver(event, data, last=False)

    def finish(self, event: str, **data) -> dict:
        """Emit the question's last event (``result`` or ``error``): a step that a stopped question
        had under way, in its worker thread, reports nothing after it."""
        return self._deliver(event, data, last=True)

    def _deliver(self, event: str, data: dict, last: bool) -> dict:
        record = {"event": event, "t": round(time.perf_counter() - self.started, 3),
                  "time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
                  "lm_calls": self.lm_calls, **({"request": self.request} if self.request else {}),
                  **{k: _plain(v) for k, v in data.items()}}
        with self._delivering:  # the worker thread's events and the caller's last one, one at a time
            if self._finished:
                return record
            self._finished = last
            self.events.append(record)
            for sink in self.sinks:
                sink(record)
        return record

    def words(self, text: str) -> None:
        """A piece of the reader's answer as it is written (``program.lm.words``): a ``words`` event,
        ``stage`` ``draft`` for the first answer, ``corrected`` for a later one (the correction's or
        the stricter retry's)."""
        self.emit("words", stage="draft" if self._answers == 0 else "corrected", text=text)

    def step_event(self, event: str, data: dict) -> None:
        """An event a step emitted where it ran (``program.stages.events.emit``)."""
        if event == "answer" and not data.get("cited") and not data.get("closed_book"):
            self._answers += 1
        self.emit(event, **data)

    def on_lm_end(self, call_id, outputs, exception=None):
        """DSPy's callback after each LM call: the count every event carries."""
        self.lm_calls += 1


class JsonlTrace:
    """A sink appending one JSON line per event to ``path`` (made with its folders if missing).

    Safe to share between recorders answering at once: each line is written whole under a lock
    and flushed. Values JSON cannot hold are written as strings.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        line = json.dumps(event, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)


EXPORTERS = ("mlflow",)


def enable_exporter(name: str) -> None:
    """Send DSPy's own traces (every module, LM and adapter call) to an exporter as well.

    ``mlflow``: ``mlflow.dspy.autolog()``, to the tracking server in ``MLFLOW_TRACKING_URI``
    (default ``./mlruns``); MLflow sends them to an OpenTelemetry collector instead when
    ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set (with ``opentelemetry-exporter-otlp``
    installed). Needs ``pip install mlflow``.

    Raises:
        ValueError: an unknown exporter, or its package is not installed (the message says
            what to install).
    """
    if name not in EXPORTERS:
        raise ValueError(f"unknown trace exporter {name!r}; choose from {', '.join(EXPORTERS)}")
    try:
        # an optional package: only this exporter needs it
        import mlflow
    except ImportError:
        raise ValueError("the mlflow trace exporter needs MLflow: pip install mlflow") from None
    mlflow.dspy.autolog()
