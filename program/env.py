"""Yes/no settings read from the environment, parsed one way everywhere."""

from __future__ import annotations

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
