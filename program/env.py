"""Settings read from the environment (yes/no, sizes, bounded numbers), parsed one way everywhere."""

from __future__ import annotations

import math
import os

YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off")


def env_flag(name: str) -> bool | None:
    """``$name`` as a yes/no setting: True for 1/true/yes/on, False for 0/false/no/off (any case,
    spaces ignored), None when unset, empty or anything else (the caller's default applies)."""
    value = os.environ.get(name, "").strip().lower()
    return True if value in YES else False if value in NO else None


def env_bytes(name: str, default: int) -> int:
    """A size cap in bytes from ``$name``, else ``default``.

    Raises:
        ValueError: the variable is set but not a whole number (the message names it).
    """
    raw = os.environ.get(name)
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a whole number of bytes, got {raw!r}") from None


def env_number(name: str, default, low, high=math.inf, kind=int):
    """``$name`` as a ``kind`` (int or float) in ``[low, high]``, else ``default`` when unset or blank.

    Raises:
        ValueError: the variable is set but not such a number, one line naming it and the range
            ("CRAG_EMBEDDER_CONCURRENCY must be a whole number from 1 to 64, got '0'").
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = None
    if value is None or not math.isfinite(value) or not low <= value <= high:
        what = "a whole number" if kind is int else "a number"
        bound = f"of {low:g} or more" if high == math.inf else f"from {low:g} to {high:g}"
        raise ValueError(f"{name} must be {what} {bound}, got {raw!r}")
    return value
