"""Step events, emitted by each step where it runs (``program.app.tracing`` lists them).

A step calls ``emit("graded", stage=..., grades=...)``; every DSPy callback of the current
context that has a ``step_event(event, data)`` method (``program.app.tracing.StepRecorder``)
receives it. With no such callback (an evaluation run, a test) an event costs one lookup.
"""

from __future__ import annotations

import dspy


def emit(event: str, **data) -> None:
    """Hand ``event`` and its ``data`` to the recorders of the current DSPy context, in order."""
    for callback in dspy.settings.get("callbacks") or ():
        receive = getattr(callback, "step_event", None)
        if receive is not None:
            receive(event, data)
