"""Bounded work per question: caps on seconds, tokens, LM calls, LM retries, web pages, strips
and claims, each configurable and each hit reported in the trace.

``QuestionCaps.from_env()`` reads the caps (environment variables in the table); a program's
``caps``, given at construction, overrides them (``CRAG(kb, caps=QuestionCaps(seconds=30))``).

| cap | default | environment | enforced by |
|---|---|---|---|
| ``seconds`` per question | 300 | ``CRAG_MAX_SECONDS`` | before every step and every LM call; a served LM call's
timeout is the time left |
| ``tokens`` (prompt + completion) | 60000 | ``CRAG_MAX_TOKENS`` | before every step |
| ``lm_calls`` | 40 | ``CRAG_MAX_LM_CALLS`` | before every step |
| ``lm_retries`` per LM call | 2 | ``CRAG_LM_RETRIES`` | ``program.lm.retry.RetryingLM`` |
| ``lm_timeout`` s per served LM call | 60 | ``CRAG_LM_TIMEOUT`` | ``program.lm.retry.RetryingLM`` |
| ``web_pages`` | 2 | ``CRAG_MAX_WEB_PAGES`` | ``WebSearcher.k`` |
| ``strips`` kept | 4 | ``CRAG_MAX_STRIPS`` | ``KnowledgeRefiner.max_strips`` |
| ``claims`` checked | 8 | ``CRAG_MAX_CLAIMS`` | ``ClaimChecker.max_claims`` |

A question that has reached its ``seconds``, ``tokens`` or ``lm_calls`` cap stops before its
next step (``seconds`` also before its next LM call) with :class:`CapReached`; ``CRAG.forward`` turns that into the
honest fallback
answer with the cap in ``trace.caps_hit`` and a note in ``trace.events``. The other caps trim
(keep the first web pages, the best strips, the first claims) and are reported the same way.
An LM call already running finishes first: a served one within its timeout (the time left), an
embedded one within its ``max_tokens``.

A failure of the LM service itself (after the capped retries) is not a cap: it is recorded on
the guard and raised by the next step as ``program.lm.retry.LMServiceError``.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field

_ENV = {"seconds": "CRAG_MAX_SECONDS", "tokens": "CRAG_MAX_TOKENS", "lm_calls": "CRAG_MAX_LM_CALLS",
        "lm_retries": "CRAG_LM_RETRIES", "lm_timeout": "CRAG_LM_TIMEOUT", "web_pages": "CRAG_MAX_WEB_PAGES",
        "strips": "CRAG_MAX_STRIPS", "claims": "CRAG_MAX_CLAIMS"}


class CapReached(Exception):
    """A question reached one of its caps; ``cap`` names it, ``limit`` is its value."""

    def __init__(self, cap: str, limit: float, where: str):
        super().__init__(f"{cap} cap of {limit:g} reached {where} ({_ENV.get(cap, cap)})")
        self.cap, self.limit, self.where = cap, limit, where


@dataclass(frozen=True)
class QuestionCaps:
    """The caps of one question (see the module docstring for units, defaults and variables).

    Raises:
        ValueError: a cap below its minimum (``seconds``/``lm_timeout`` must be > 0, counts >= 1,
            ``lm_retries`` >= 0); the message names the cap and its variable.
    """

    seconds: float = 300.0
    tokens: int = 60000
    lm_calls: int = 40
    lm_retries: int = 2
    lm_timeout: float = 60.0
    web_pages: int = 2
    strips: int = 4
    claims: int = 8

    def __post_init__(self):
        for name, value in asdict(self).items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not number or not (value >= 0 if name == "lm_retries" else value > 0):
                raise ValueError(f"cap {name} ({_ENV[name]}) must be {'>= 0' if name == 'lm_retries' else '> 0'}, "
                                 f"got {value!r}")

    @classmethod
    def from_env(cls, **overrides) -> "QuestionCaps":
        """Defaults, then the environment variables, then ``overrides``.

        Raises:
            ValueError: a variable that is not a number, or a cap out of range.
        """
        values = {}
        for name, var in _ENV.items():
            raw = os.environ.get(var)
            if raw:
                kind = float if name in ("seconds", "lm_timeout") else int
                try:
                    values[name] = kind(raw)
                except ValueError:
                    raise ValueError(f"{var} must be a {'number' if kind is float else 'whole number'}, "
                                     f"got {raw!r}") from None
        return cls(**{**values, **{k: v for k, v in overrides.items() if v is not None}})


@dataclass
class QuestionGuard:
    """The running account of one question against its caps.

    Attributes:
        caps: the caps in force.
        deadline: ``time.monotonic()`` value at which the ``seconds`` cap is reached.
        tokens, lm_calls: spent so far.
        caps_hit: ``{"cap", "limit", "detail"}`` per cap reached or trimmed by.
        stop: the ``CapReached`` that stops the question, once one is reached.
        lm_failure: the LM service failure that stops the question, once one happened.
    """

    caps: QuestionCaps
    deadline: float = 0.0
    tokens: int = 0
    lm_calls: int = 0
    caps_hit: list[dict] = field(default_factory=list)
    stop: CapReached | None = None
    lm_failure: Exception | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def remaining(self) -> float:
        """Seconds left before the ``seconds`` cap (may be negative)."""
        return self.deadline - time.monotonic()

    def report(self, cap: str, limit: float, detail: str) -> None:
        """Record that ``cap`` trimmed or stopped the work (appears in ``trace.caps_hit``)."""
        with self._lock:
            self.caps_hit.append({"cap": cap, "limit": limit, "detail": detail})

    def reach(self, cap: str, limit: float, where: str) -> CapReached:
        """Record ``cap`` as reached (first one wins) and return the exception to raise."""
        with self._lock:
            if self.stop is None:
                self.stop = CapReached(cap, limit, where)
                self.caps_hit.append({"cap": cap, "limit": limit, "detail": f"reached {where}"})
            return self.stop

    def check(self, where: str) -> None:
        """Raise the LM failure or ``CapReached`` when the question must stop (before ``where``)."""
        if self.lm_failure is not None:
            raise self.lm_failure
        if self.stop is not None:
            raise self.stop
        if self.remaining() <= 0:
            raise self.reach("seconds", self.caps.seconds, where)
        if self.tokens >= self.caps.tokens:
            raise self.reach("tokens", self.caps.tokens, f"{where} ({self.tokens} tokens spent)")
        if self.lm_calls >= self.caps.lm_calls:
            raise self.reach("lm_calls", self.caps.lm_calls, f"{where} ({self.lm_calls} calls made)")

    def after_step(self, lm_calls: int, tokens: int) -> None:
        """Add a finished step's LM calls and tokens; raise the LM service failure if one happened
        in it (its judges read the failure as an unparseable answer and carried on)."""
        with self._lock:
            self.lm_calls += lm_calls
            self.tokens += tokens
        if self.lm_failure is not None:
            raise self.lm_failure


_GUARD: ContextVar[QuestionGuard | None] = ContextVar("crag_question_guard", default=None)


def current_guard() -> QuestionGuard | None:
    """The guard of the question running in this context, or None outside ``CRAG.forward``."""
    return _GUARD.get()


def report_cap(cap: str, limit: float, detail: str) -> None:
    """Report a trimming cap on the current question (no-op outside one)."""
    guard = _GUARD.get()
    if guard is not None:
        guard.report(cap, limit, detail)


@contextmanager
def guarded(caps: QuestionCaps):
    """Run one question under ``caps``: yields its :class:`QuestionGuard`."""
    guard = QuestionGuard(caps, deadline=time.monotonic() + caps.seconds)
    token = _GUARD.set(guard)
    try:
        yield guard
    finally:
        _GUARD.reset(token)
