"""Metrics for evaluation runs.

* :func:`answer_correct`: the CRAG paper's PopQA rule (a gold string appears in the answer).
* :func:`median`, :func:`percentile`: of the numbers present, ignoring missing values.
* :func:`rate`: share of True flags.
* :func:`confusion`: expected action -> predicted action -> count.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def answer_correct(answer: str | None, gold: Iterable[str]) -> bool:
    """True when any gold string appears in the answer, case-insensitively (CRAG on PopQA).

    Args:
        answer: the model's answer text; None or "" is never correct.
        gold: acceptable answers (PopQA ``possible_answers``); blank strings are ignored,
            so an empty gold list is never correct.

    Returns:
        bool. Substring match after ``str.casefold`` on both sides, no other normalisation
        (so ``"He is a Journalist."`` matches ``["journalist"]``).
    """
    if not answer:
        return False
    text = answer.casefold()
    return any(g.strip().casefold() in text for g in gold if g and g.strip())


def median(values: Iterable[float | int | None]) -> float | None:
    """Median of the values that are present (None and NaN are skipped).

    Returns:
        The median as a float, or None when no value is present.
    """
    xs = sorted(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not xs:
        return None
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2.0


def rate(flags: Iterable[bool]) -> float | None:
    """Fraction of True among ``flags`` in [0, 1]; None when there are none."""
    fs = list(flags)
    return sum(1 for f in fs if f) / len(fs) if fs else None


def percentile(values: Iterable[float | int | None], q: float) -> float | None:
    """The ``q``-th percentile (``q`` in [0, 100]) of the values present, linearly interpolated
    between the closest ranks (numpy's default method); None and NaN are skipped.

    Returns:
        A float, or None when no value is present.

    Raises:
        ValueError: ``q`` outside [0, 100].
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    xs = sorted(float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v)))
    if not xs:
        return None
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def confusion(expected: dict, predicted: dict) -> dict:
    """``expected action -> predicted action -> count`` over the questions of ``expected``."""
    table: dict = {}
    for q, a in expected.items():
        table.setdefault(a, {}).setdefault(predicted[q], 0)
        table[a][predicted[q]] += 1
    return table
