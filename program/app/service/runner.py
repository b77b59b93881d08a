"""One question on the shared program: per-request settings, the queue, the time limit, stopping.

The program is loaded once and shared. Each question runs in a worker thread (as
``dspy.asyncify`` does: the program's judges, index and page fetches are blocking code) under
its own ``dspy.context``: its own copy of the LM (so its history, and the cost of each step,
are its own), its own step recorder, and its own stop flag. Its options (``k``, web backend,
retrieve-or-not, self-check) apply to a shallow copy of the program, so one request never
changes another's settings, and may only narrow the operator's.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio
import dspy

from program.app.resources import web_name
from program.app.tracing import StepRecorder
from program.guards.cost import cancellable
from program.lm.retry import LMServiceError, will_retry
from program.lm.words import words_to
from program.retrieval.filters import DocumentFilter
from program.types import CRAGResult

log = logging.getLogger("program.service")
audit = logging.getLogger("program.audit")


class ServiceError(Exception):
    """A question the service could not answer; ``status`` is the HTTP status.

    The message is the one line the client sees: nothing of the inside (no address, path,
    variable name or upstream body). ``detail`` is what the operator's log gets, ``request``
    the request id both carry.
    """

    def __init__(self, status: int, message: str, detail: str | None = None, request: str | None = None):
        super().__init__(message)
        self.status, self.detail, self.request = status, detail, request


def _is_lm_error(exc: BaseException) -> bool:
    if isinstance(exc, LMServiceError):
        return True
    module = type(exc).__module__ or ""
    return module.startswith(("litellm", "openai", "httpx", "dspy.utils.exceptions")) or str(exc).startswith(
        "llama.cpp error")


@dataclass
class Options:
    """A request's options; None keeps the server's setting. ``documents``: what the question may
    read (the request's filter within its key's scope; None: the whole knowledge base); ``key``:
    the key's name, for the audit line."""

    k: int | None = None
    web: str | None = None
    decide_retrieval: bool | None = None
    self_check: bool | None = None
    documents: DocumentFilter | None = None
    key: str = "anyone"


class QuestionRunner:
    """Answer questions on one shared program, at most ``concurrency`` at once.

    Args:
        program: a loaded ``CRAG``, built with ``decide_retrieval=True`` so that requests may
            turn retrieve-or-not off (its predictors exist), or on where ``decide_retrieval`` is.
        lm: the ``dspy.LM`` to answer with; each question gets ``lm.copy()``.
        concurrency: questions answered at once; the rest wait (the queue depth in ``/healthz``).
        max_queue: questions waiting at most; a question beyond it is refused with 503.
        timeout: seconds a question may take, waiting included; then 504 and its work stops.
        decide_retrieval: the server's setting for retrieve-or-not.
        sinks: extra sinks for every question's step events (the ``--trace-jsonl`` file).
        limiter: the slots shared with the server's other knowledge bases' runners (their LM is
            one); default: this runner's own, of ``concurrency`` slots.
        name: the knowledge base's served name (the audit line's).
        audit_questions: the audit line holds the question's text too (off by default).

    The operator's settings bound every request: ``k`` at most the program's, the web backend
    the program's or none, retrieve-or-not on only where the operator turned it on.
    """

    def __init__(self, program, lm, *, concurrency: int = 1, max_queue: int = 64,
                 timeout: float = 300.0, decide_retrieval: bool = False, sinks=(),
                 limiter: anyio.CapacityLimiter | None = None, name: str = "", audit_questions: bool = False):
        self.program, self.lm = program, lm
        self.name, self.audit_questions = name, audit_questions
        self.concurrency, self.max_queue, self.timeout = concurrency, max_queue, timeout
        self.decide_retrieval = decide_retrieval
        self.sinks = list(sinks)
        # one limiter for the knowledge bases of one server: they share its LM's slots and queue
        self.limiter = limiter or anyio.CapacityLimiter(concurrency)
        self.answered = self.failed = 0

    # ---- state for /healthz --------------------------------------------------------------------
    @property
    def running(self) -> int:
        """Questions being answered now (at most ``concurrency``)."""
        return int(self.limiter.borrowed_tokens)

    @property
    def waiting(self) -> int:
        """Questions queued for a free slot: the queue depth ``/healthz`` reports."""
        return self.limiter.statistics().tasks_waiting

    @property
    def full(self) -> bool:
        """Every slot taken and ``max_queue`` questions waiting: the next one gets 503."""
        return self.running >= self.concurrency and self.waiting >= self.max_queue

    @property
    def web(self) -> str:
        """The operator's web backend as ``--web`` names it ('snapshot', 'searxng' ...), 'none' when off."""
        return web_name(self.program.web_searcher.backend)

    # ---- per request ---------------------------------------------------------------------------
    def view(self, options: Options):
        """The shared program with this request's options: a program built narrower
        (``CRAG.narrowed``), sharing the knowledge base, the judges and the compiled prompts.

        Raises:
            ServiceError: 422 for an option that would widen the operator's settings (more
                passages, another web backend, retrieve-or-not where the operator left it off).
        """
        if options.k is not None and not 1 <= options.k <= self.program.settings.k:
            raise ServiceError(422, f"k: at most {self.program.settings.k} on this server")
        if options.web not in (None, "none", self.web):
            raise ServiceError(422, f"web: this server allows 'none' or '{self.web}'")
        if options.decide_retrieval and not self.decide_retrieval:
            raise ServiceError(422, "decide_retrieval: not turned on on this server")
        decide = self.decide_retrieval if options.decide_retrieval is None else options.decide_retrieval
        settings = replace(self.program.settings, k=options.k or self.program.settings.k,
                           self_check=self.program.settings.self_check if options.self_check is None
                           else options.self_check, decide_retrieval=decide)
        return self.program.narrowed(settings, web=not (options.web == "none" and self.web != "none"),
                                     documents=options.documents)

    def recorder(self, *sinks) -> StepRecorder:
        """A step recorder for one question, with a fresh request id, feeding ``sinks`` and the server's."""
        return StepRecorder(*sinks, *self.sinks, request=uuid.uuid4().hex[:12])

    async def answer(self, question: str, options: Options, recorder: StepRecorder,
                     history: Sequence[tuple[str, str]] = ()) -> CRAGResult:
        """Answer ``question`` in a worker thread; the recorder sees every step, then ``result`` or
        ``error`` last (a cancelled question's too: 499). ``history``: the conversation before it
        (``(role, text)`` pairs), whose follow-up is read as a standalone question first.

        Raises:
            ServiceError: 422 an option that widens the server's, 503 the queue is full, 504 over the
                time limit, 502 the language model failed, 500 anything else; its message names no
                internal, the operator's log (logger ``program.service``) gets the detail.
            asyncio.CancelledError: the caller went away; the question stops before its next step.
        """
        try:
            result = await self._answer(question, options, recorder, history)
        except ServiceError as exc:
            self.failed += 1
            exc.request = recorder.request
            log.log(logging.ERROR if exc.status >= 500 else logging.INFO, "request %s: %d %s", recorder.request,
                    exc.status, exc.detail or exc)
            self._audit(question, options, None, recorder, f"error {exc.status}")
            recorder.finish("error", status=exc.status, detail=str(exc))
            raise
        except asyncio.CancelledError:
            self._audit(question, options, None, recorder, "error 499")
            recorder.finish("error", status=499, detail="stopped: the client went away")
            raise
        self.answered += 1
        self._audit(question, options, result, recorder, result.outcome.ending.value)
        recorder.finish("result", result=result.to_dict())
        return result

    def _audit(self, question: str, options: Options, result: CRAGResult | None, recorder: StepRecorder,
               outcome: str) -> None:
        """One audit line per question (logger ``program.audit``, JSON): the key's name, the
        knowledge base, the filter in force, the documents cited, the outcome (``program.types.Ending``,
        or ``error <status>`` for a question that failed); the question only when the operator
        asked (``--audit-questions``). To the step trace too."""
        cited = sorted({c.source_id.rsplit("#", 1)[0] for c in result.citations if c.source_id}) if result else []
        flt = options.documents.to_dict() if options.documents is not None else None
        record = {"request": recorder.request, "key": options.key, "knowledge_base": self.name, "filter": flt,
                  "outcome": outcome, "cited": cited}
        if self.audit_questions:
            record["question"] = question
        audit.info("%s", json.dumps(record, ensure_ascii=False))
        for sink in self.sinks:
            sink({"event": "audit", **record})

    async def _answer(self, question: str, options: Options, recorder: StepRecorder,
                      history: Sequence[tuple[str, str]]) -> CRAGResult:
        program = self.view(options)
        if self.full:
            raise ServiceError(503, f"busy: {self.waiting} questions are waiting; try again later")
        stop = threading.Event()
        lm = self.lm.copy()
        lm_errors: list[str] = []

        def work() -> CRAGResult:
            # An LM call that failed after DSPy's own retries stops the question at its next step:
            # the judges would read the failure as "irrelevant" and every later call would fail too.
            with dspy.context(lm=lm, callbacks=[recorder, _LMErrors(lm_errors, stop)]), cancellable(stop), \
                    words_to(recorder.words):
                return program(question=question, **({"history": list(history)} if history else {}))

        try:
            with anyio.fail_after(self.timeout):
                result = await anyio.to_thread.run_sync(work, limiter=self.limiter, abandon_on_cancel=True)
        except TimeoutError:
            stop.set()
            raise ServiceError(504, f"the question took more than {self.timeout:g} s; stopped") from None
        except Exception as exc:
            raise _failure(exc, lm_errors) from None
        finally:
            stop.set()  # a cancelled or timed-out question stops before its next step
        if lm_errors:  # the failure came in the last step, whose judge fell back on its own
            result.trace.note(f"degraded: {len(lm_errors)} LM call(s) failed")
            log.warning("request %s: degraded: %s", recorder.request, lm_errors[-1])
        return result


def _failure(exc: Exception, lm_errors: list[str]) -> ServiceError:
    """The ``ServiceError`` for a question that raised: 502 for the LM, else 500; the client's
    message says which and no more, the detail (endpoint, upstream body) is the operator's."""
    if isinstance(exc, LMServiceError) or lm_errors or _is_lm_error(exc):
        detail = str(exc) if isinstance(exc, LMServiceError) or not lm_errors else lm_errors[0]
        return ServiceError(502, "the language model failed; try again later", detail)
    return ServiceError(500, "internal error", f"{type(exc).__name__}: {exc}")


class _LMErrors(dspy.utils.callback.BaseCallback):
    """Collects the LM calls that raised, one line each, and stops the question."""

    def __init__(self, errors: list[str], stop: threading.Event):
        self.errors, self.stop = errors, stop

    def on_lm_end(self, call_id, outputs, exception=None):
        if exception is not None and not will_retry(exception):
            self.stop.set()
            self.errors.append(f"{type(exception).__name__}: "
                               f"{str(exception).splitlines()[0][:300] if str(exception) else ''}")
