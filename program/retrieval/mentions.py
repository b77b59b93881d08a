"""Whether a knowledge base mentions a name at all: the evidence an abstention can rest on.

A question about "Velero" put to documents that never write "Velero" cannot be answered from
them, however well a draft reads: the draft was written from passages about something else
(CRAG §4.3 sends such a question to the web; without one, the honest answer is to decline).
A term counts as mentioned when a word of the knowledge base equals it, in either number
("volumesnapshot" is mentioned by "VolumeSnapshots").
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from program.text import words

# A term the checks may ask about: lower-cased word characters and inner hyphens or dots.
_TERM = re.compile(r"^\w+(?:[-.]\w+)*$")


def word_set(texts: Iterable[str]) -> frozenset[str]:
    """Every lower-cased word of ``texts`` (``program.text.words``)."""
    found: set[str] = set()
    for text in texts:
        found.update(words(text))
    return frozenset(found)


def forms(term: str) -> tuple[str, ...]:
    """The singular and plural forms a mention may take: ``"pod"`` -> ``("pod", "pods")``."""
    term = term.lower()
    if term.endswith("s") and len(term) > 3:
        return term, term[:-1]
    return term, term + "s"


def mentioned_in(vocabulary: frozenset[str] | set[str], terms: Iterable[str]) -> set[str]:
    """The ``terms`` that ``vocabulary`` (a ``word_set``) holds in either number."""
    return {t for t in terms if any(f in vocabulary for f in forms(t))}


def searchable(terms: Iterable[str]) -> list[str]:
    """The terms a database may be asked about (word characters, inner hyphens and dots), sorted."""
    return sorted({t.lower() for t in terms if _TERM.match(t)})
