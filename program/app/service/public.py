"""What a client sees of a result or a step event: a knowledge-base document's place on the server
(its file path, where a web page has its URL) taken out. The operator's trace file keeps it."""

from __future__ import annotations

import copy
from dataclasses import fields, is_dataclass


def _is_web_address(url: str) -> bool:
    return url.startswith(("http://", "https://"))


def _scrub(value) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "url" and isinstance(item, str) and not _is_web_address(item):
                value[key] = ""
            else:
                _scrub(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _scrub(item)
    elif is_dataclass(value) and not isinstance(value, type):
        for field in fields(value):
            item = getattr(value, field.name)
            if field.name == "url" and isinstance(item, str) and not _is_web_address(item):
                object.__setattr__(value, "url", "")  # frozen dataclasses too: this is a copy
            else:
                _scrub(item)


def public(value):
    """A deep copy of ``value`` (a ``CRAGResult``, an event dict, or lists and dicts of them) whose
    ``url`` fields that are not http(s) addresses (a corpus file's path) are empty; ``source_id``
    still names the document. ``value`` itself is unchanged."""
    value = copy.deepcopy(value)
    _scrub(value)
    return value
