"""A served LM with bounded retries, back-off and a clear error naming its endpoint.

DSPy's own retry (``num_retries``) waits as long as a server's ``Retry-After`` says, however
long, and a failure that survives it reaches the judges as one more unparseable answer: the
question then ends in "I don't have reliable information" as if the knowledge base were empty.
:class:`RetryingLM` makes a served LM fail loudly and boundedly instead:

* each call has a timeout (``lm_timeout`` seconds, or the question's time left when less);
* a rate limit (429), a server error (5xx), a timeout, a lost connection or a response that
  breaks the protocol (a body cut off) is retried at most
  ``retries`` times, after ``backoff * 2**n`` seconds or the server's ``Retry-After``, whichever
  the server asks, but never more than ``max_wait`` seconds nor past the question's deadline;
* when the retries are spent (or the failure cannot be retried: a bad or missing key, an unknown model),
  :class:`LMServiceError` names the endpoint, the attempts and the last error, and is recorded on
  the running question's guard (``program.guards.caps``), whose next step raises it. The judges that
  caught it as "unparseable" never get to turn an outage into an answer.

Outputs that arrive but do not parse (an empty completion, truncated JSON, a label out of range,
garbage) are not service failures: the judges treat them as unparseable and say so in the trace.
"""

from __future__ import annotations

import math
import time
from contextvars import ContextVar

import dspy
from dspy.utils.exceptions import (LMAuthError, LMBillingError, LMConfigurationError, LMError, LMProviderError,
                                   LMUnsupportedModelError, is_retryable_lm_error)

from program.guards.caps import CapReached, current_guard

# failures that no retry and no other prompt will fix: the question cannot be answered (a bad or
# missing key, no such model, a client DSPy cannot set up)
_FATAL = (LMAuthError, LMBillingError, LMUnsupportedModelError, LMConfigurationError)


def _retryable(exc: BaseException) -> bool:
    """429, 5xx, timeouts, lost connections, and a provider answer that breaks the protocol
    (a bare ``LMProviderError``: a body that is not JSON, a response without choices)."""
    return is_retryable_lm_error(exc) or type(exc) is LMProviderError


class LMServiceError(RuntimeError):
    """The LM endpoint failed after the capped retries; the one-line message names it."""


_RETRY_PENDING: ContextVar[bool] = ContextVar("crag_lm_retry_pending", default=False)


def will_retry(exc: BaseException | None) -> bool:
    """True when ``exc``, raised by an LM call now ending, is about to be retried by a
    :class:`RetryingLM` (for callbacks that watch LM failures: the attempt is not the last)."""
    return exc is not None and _RETRY_PENDING.get() and _retryable(exc)


def error_line(exc: BaseException) -> str:
    """``"LMAuthError: first line of its message"`` (at most 200 characters of it): an LM failure
    in one line. Raises nothing."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


class RetryingLM(dspy.LM):
    """A ``dspy.LM`` for a served model whose calls are retried boundedly (see the module docstring).

    Args:
        model: a DSPy model string (``openai/...``, ``ollama_chat/...``).
        api_base: the server's base URL (named in errors).
        retries: retries after the first attempt (default 2: three attempts at most).
        backoff: first back-off in seconds, doubled per retry.
        max_wait: the longest wait before a retry, whatever ``Retry-After`` says (seconds).
        timeout: seconds one attempt may take (sent as the client timeout); None for an in-process
            engine (the embedded model), whose calls are bounded by ``max_tokens`` instead.
        **kwargs: the other ``dspy.LM`` arguments (``max_tokens``, ``api_key``, ``cache``...).

    Attributes:
        retries_made: retries made over the LM's life (a retry that succeeded included).
    """

    def __init__(self, model: str, *, api_base: str | None = None, retries: int = 2, backoff: float = 0.5,
                 max_wait: float = 10.0, timeout: float | None = 60.0, **kwargs):
        if api_base:
            kwargs["api_base"] = api_base
        if timeout is not None:
            kwargs["timeout"] = timeout
        kwargs.pop("num_retries", None)  # the retries are ours
        super().__init__(model, num_retries=0, **kwargs)
        self.endpoint = api_base or model
        self.retries, self.backoff, self.max_wait, self.timeout = retries, backoff, max_wait, timeout
        self.retries_made = 0

    def __call__(self, *args, **kwargs):
        guard = current_guard()
        attempts = self.retries + 1
        for attempt in range(attempts):
            if guard is not None:
                guard.check("before an LM call")
                if self.timeout is not None and guard.remaining() < self.timeout:
                    kwargs["timeout"] = max(1, math.ceil(guard.remaining()))  # whole seconds: few distinct clients
            token = _RETRY_PENDING.set(attempt < attempts - 1)
            try:
                return super().__call__(*args, **kwargs)
            except LMError as exc:
                last = attempt == attempts - 1
                if isinstance(exc, _FATAL) or (not last and not _retryable(exc)):
                    if isinstance(exc, _FATAL):
                        raise self._fail(guard, f"{error_line(exc)}")
                    raise  # an invalid request (a prompt too long...): the predictor's problem
                if last:
                    if not _retryable(exc):
                        raise
                    raise self._fail(guard, f"{error_line(exc)} after {attempts} attempt(s)")
                wait = self._wait(exc, attempt)
                if guard is not None and wait >= guard.remaining():
                    raise guard.reach("seconds", guard.caps.seconds, "while waiting to retry an LM call") from None
                self.retries_made += 1
                if guard is not None:
                    guard.report("lm_retries", self.retries, f"retry {attempt + 1} after {error_line(exc)}; "
                                                             f"waited {wait:.2f} s")
                time.sleep(wait)
            finally:
                _RETRY_PENDING.reset(token)
        raise AssertionError("unreachable")

    def _wait(self, exc: LMError, attempt: int) -> float:
        hint = getattr(exc, "retry_after", None)
        wait = float(hint) if isinstance(hint, (int, float)) and hint >= 0 else self.backoff * 2 ** attempt
        return min(wait, self.max_wait)

    def _fail(self, guard, reason: str) -> LMServiceError:
        error = LMServiceError(f"the language model at {self.endpoint} failed: {reason}")
        if guard is not None and guard.lm_failure is None:
            guard.lm_failure = error
        return error

    def copy(self, **kwargs):
        new = super().copy(**kwargs)
        new.retries_made = 0
        return new


__all__ = ["CapReached", "LMServiceError", "RetryingLM", "error_line", "will_retry"]
