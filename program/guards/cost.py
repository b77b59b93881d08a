"""Per-step cost accounting: LM calls, tokens and seconds, read from the LM's history.

DSPy records every LM call (usage included) in ``lm.history``; a step counts the entries
added after the one that was last when it began. (Not a length difference: at
``settings.max_history_size`` DSPy drops the oldest entry for each new one, so the length
stops changing.) Cached calls are counted as calls with the usage the cache stored.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from contextvars import ContextVar

import dspy

from program.guards.caps import current_guard
from program.types import StepCost, Trace

_STOP: ContextVar[threading.Event | None] = ContextVar("crag_stop", default=None)


class QuestionCancelled(Exception):
    """The question's work was stopped between two steps (its client went away, or it timed out)."""


@contextmanager
def cancellable(stop: threading.Event):
    """Run the block so that every ``step`` started inside it first checks ``stop``.

    Once ``stop`` is set (from any thread), the next step raises ``QuestionCancelled`` instead
    of starting: a step already running (one LM call, one page fetch) finishes first.
    """
    token = _STOP.set(stop)
    try:
        yield stop
    finally:
        _STOP.reset(token)


def _history() -> list:
    lm = dspy.settings.lm
    return getattr(lm, "history", None) if lm is not None else None


def _added_since(history: list, marker) -> list:
    """The entries after ``marker`` (None: all); all of them when the cap has dropped it."""
    if marker is None:
        return list(history)
    for i in range(len(history) - 1, -1, -1):
        if history[i] is marker:
            return history[i + 1:]
    return list(history)


@contextmanager
def step(trace: Trace, name: str):
    """Record the LM calls, tokens and seconds spent inside the block as one ``StepCost``.

    Usage: ``with step(trace, "evaluate") as cost: ...``; ``cost.notes`` may be set inside.
    The step is appended to ``trace.steps`` even when the block raises.

    Inside a question run under caps (``program.guards.caps.guarded``), the step first checks them and
    afterwards adds its calls and tokens to the question's account.

    Raises:
        QuestionCancelled: inside ``cancellable(stop)`` once ``stop`` is set; the step does not run.
        program.guards.caps.CapReached: the question has reached a cap; the step does not run.
        program.lm.retry.LMServiceError: the LM service failed in this step or before it.
    """
    stop = _STOP.get()
    if stop is not None and stop.is_set():
        raise QuestionCancelled(f"stopped before the {name!r} step")
    guard = current_guard()
    if guard is not None:
        guard.check(f"before the {name!r} step")  # CapReached, or the LM's failure
    history = _history()
    marker = history[-1] if history else None
    cost = StepCost(step=name)
    started = time.perf_counter()
    try:
        yield cost
    finally:
        cost.seconds = round(time.perf_counter() - started, 3)
        new = _added_since(history, marker) if history is not None else []
        cost.lm_calls = len(new)
        for entry in new:
            usage = entry.get("usage") or {}
            cost.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            cost.completion_tokens += int(usage.get("completion_tokens") or 0)
            cost.cached_tokens += int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
        trace.steps.append(cost)
    if guard is not None:
        guard.after_step(cost.lm_calls, cost.prompt_tokens + cost.completion_tokens)
