"""Page furniture: the running headers and footers a PDF repeats on every page.

A line among the first or last ``EDGE_LINES`` lines of a page is furniture when, with its digits
blanked (page numbers change), it stands at the edge of at least ``MIN_SHARE`` of the pages (and
of at least three). Dropping it keeps "OWASP Top 10 2017 | Page 14" out of every chunk.
"""

from __future__ import annotations

import re
from collections import Counter

EDGE_LINES = 2
MIN_SHARE = 0.5
_DIGITS = re.compile(r"\d+")


def _key(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).casefold()


def _edges(lines: list[str]) -> list[int]:
    """Indices of the first and last ``EDGE_LINES`` non-empty lines."""
    filled = [i for i, line in enumerate(lines) if line.strip()]
    return sorted(set(filled[:EDGE_LINES] + filled[-EDGE_LINES:]))


def drop_furniture(pages: list[list[str]]) -> list[list[str]]:
    """``pages`` (each a list of lines) without their repeated headers and footers.

    >>> bodies = ["Use TLS.", "Log errors.", "Hash passwords.", "Check input."]
    >>> pages = [["Guide | page %d" % n, body] for n, body in enumerate(bodies, 1)]
    >>> drop_furniture(pages)[0]
    ['Use TLS.']
    """
    if len(pages) < 3:
        return pages
    seen = Counter(k for lines in pages for k in {_key(lines[i]) for i in _edges(lines)} if k)
    least = max(3, MIN_SHARE * len(pages))
    furniture = {k for k, n in seen.items() if n >= least}
    if not furniture:
        return pages
    out = []
    for lines in pages:
        edges = set(_edges(lines))
        out.append([line for i, line in enumerate(lines) if not (i in edges and _key(line) in furniture)])
    return out
