"""One question on the shared program: per-request settings, the queue, the time limit, stopping.

The program is loaded once and shared. Each question runs in a worker thread (as
``dspy.asyncify`` does: the program's judges, index and page fetches are blocking code) under
its own ``dspy.context``: its own copy of the LM (so its history, and the cost of each step,
are its own), its own step recorder, and its own stop flag. Its options (``k``, web backend,
retrieve-or-not, self-check) apply to a shallow copy of the program, so one request never
changes another's settings.
"""

from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import dataclass

import anyio
import dspy

from program.app.tracing import StepRecorder
from program.guards.cost import cancellable
from program.lm.retry import LMServiceError, will_retry
from program.types import CRAGResult
from program.web.base import WebSearchError
from program.web.config import WebConfig
from program.web.registry import build_backend


class ServiceError(Exception):
    """A question the service could not answer; ``status`` is the HTTP status, the message one line."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _is_lm_error(exc: BaseException) -> bool:
    if isinstance(exc, LMServiceError):
        return True
    module = type(exc).__module__ or ""
    return module.startswith(("litellm", "openai", "httpx", "dspy.utils.exceptions")) or str(exc).startswith("llama.cpp error")


@dataclass
class Options:
    """A request's options; None keeps the server's setting."""

    k: int | None = None
    web: str | None = None
    decide_retrieval: bool | None = None
    self_check: bool | None = None


class QuestionRunner:
    """Answer questions on one shared program, at most ``concurrency`` at once.

    Args:
        program: a loaded ``CRAG``, built with ``decide_retrieval=True`` so that requests may
            turn retrieve-or-not on (its predictors exist) or off.
        lm: the ``dspy.LM`` to answer with; each question gets ``lm.copy()``.
        web_config: the server's ``WebConfig``; a request naming another backend gets one
            built from it (same limits, safety and scope).
        concurrency: questions answered at once; the rest wait (the queue depth in ``/healthz``).
        max_queue: questions waiting at most; a question beyond it is refused with 503.
        timeout: seconds a question may take, waiting included; then 504 and its work stops.
        decide_retrieval: the server's default for retrieve-or-not.
        sinks: extra sinks for every question's step events (the ``--trace-jsonl`` file).
    """

    def __init__(self, program, lm, *, web_config=None, concurrency: int = 1, max_queue: int = 64,
                 timeout: float = 300.0, decide_retrieval: bool = False, sinks=()):
        self.program, self.lm, self.web_config = program, lm, web_config
        self.concurrency, self.max_queue, self.timeout = concurrency, max_queue, timeout
        self.decide_retrieval = decide_retrieval
        self.sinks = list(sinks)
        self.limiter = anyio.CapacityLimiter(concurrency)
        self.answered = self.failed = 0
        self._backends = {getattr(program.web_searcher.backend, "name", "none"): program.web_searcher.backend}
        self._backends_lock = threading.Lock()

    # ---- state for /healthz --------------------------------------------------------------------
    @property
    def running(self) -> int:
        """Questions being answered now (at most ``concurrency``)."""
        return int(self.limiter.borrowed_tokens)

    @property
    def waiting(self) -> int:
        """Questions queued for a free slot: the queue depth ``/healthz`` reports."""
        return self.limiter.statistics().tasks_waiting

    # ---- per request ---------------------------------------------------------------------------
    def backend(self, name: str | None):
        """The web backend for a request (None: the server's). Raises ``ServiceError`` 400 when it
        cannot be set up (a missing API key or URL)."""
        default = self.program.web_searcher.backend
        if name is None or name == getattr(default, "name", "none"):
            return default
        with self._backends_lock:
            if name not in self._backends:
                try:
                    config = (self.web_config or WebConfig.from_env()).with_(backend=name)
                    self._backends[name] = build_backend(config)
                except (WebSearchError, ValueError) as exc:
                    raise ServiceError(400, f"web: {exc}") from None
            return self._backends[name]

    def view(self, options: Options):
        """The shared program with this request's options: a shallow copy sharing every predictor,
        the knowledge base and the judges."""
        view = copy.copy(self.program)
        if options.k is not None:
            view.k = options.k
        if options.self_check is not None:
            view.self_check = options.self_check
        decide = self.decide_retrieval if options.decide_retrieval is None else options.decide_retrieval
        if not decide:
            view.decider = view.closed_book = None
        backend = self.backend(options.web)
        if backend is not self.program.web_searcher.backend:
            view.web_searcher = copy.copy(self.program.web_searcher)
            view.web_searcher.backend = backend
        return view

    def recorder(self, *sinks) -> StepRecorder:
        """A step recorder for one question, with a fresh request id, feeding ``sinks`` and the server's."""
        return StepRecorder(*sinks, *self.sinks, request=uuid.uuid4().hex[:12])

    async def answer(self, question: str, options: Options, recorder: StepRecorder) -> CRAGResult:
        """Answer ``question`` in a worker thread; the recorder sees every step, then ``result`` or ``error``.

        Raises:
            ServiceError: 400 bad web option, 503 the queue is full, 504 over the time limit,
                502 the language model failed (a call raised after DSPy's retries), 500 anything else.
            asyncio.CancelledError: the caller went away; the question stops before its next step.
        """
        try:
            result = await self._answer(question, options, recorder)
        except ServiceError as exc:
            self.failed += 1
            recorder.emit("error", status=exc.status, detail=str(exc))
            raise
        self.answered += 1
        recorder.emit("result", result=result.to_dict())
        return result

    async def _answer(self, question: str, options: Options, recorder: StepRecorder) -> CRAGResult:
        program = self.view(options)
        if self.waiting >= self.max_queue:
            raise ServiceError(503, f"busy: {self.waiting} questions are waiting; try again later")
        stop = threading.Event()
        lm = self.lm.copy()
        lm_errors: list[str] = []

        def work() -> CRAGResult:
            # An LM call that failed after DSPy's own retries stops the question at its next step:
            # the judges would read the failure as "irrelevant" and every later call would fail too.
            with dspy.context(lm=lm, callbacks=[recorder, _LMErrors(lm_errors, stop)]), cancellable(stop):
                return program(question=question)

        try:
            with anyio.fail_after(self.timeout):
                result = await anyio.to_thread.run_sync(work, limiter=self.limiter, abandon_on_cancel=True)
        except TimeoutError:
            stop.set()
            raise ServiceError(504, f"the question took more than {self.timeout:g} s; stopped") from None
        except Exception as exc:
            if isinstance(exc, LMServiceError):  # names the endpoint and the attempts
                raise ServiceError(502, str(exc)) from None
            if lm_errors or _is_lm_error(exc):
                reason = lm_errors[0] if lm_errors else f"{type(exc).__name__}: {exc}"
                raise ServiceError(502, f"the language model failed: {reason}") from None
            raise ServiceError(500, f"internal error: {type(exc).__name__}: {exc}") from None
        finally:
            stop.set()  # a cancelled or timed-out question stops before its next step
        if lm_errors:  # the failure came in the last step, whose judge fell back on its own
            result.trace.note(f"degraded: {len(lm_errors)} LM call(s) failed; last: {lm_errors[-1]}")
        return result


class _LMErrors(dspy.utils.callback.BaseCallback):
    """Collects the LM calls that raised, one line each, and stops the question."""

    def __init__(self, errors: list[str], stop: threading.Event):
        self.errors, self.stop = errors, stop

    def on_lm_end(self, call_id, outputs, exception=None):
        if exception is not None and not will_retry(exception):
            self.stop.set()
            self.errors.append(f"{type(exception).__name__}: {str(exception).splitlines()[0][:300] if str(exception) else ''}")
