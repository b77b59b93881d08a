"""A Markdown file's YAML front matter: metadata, not text."""

from __future__ import annotations

import re

import yaml

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*(?:\n|\Z)", flags=re.S)
_HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$", flags=re.M)


def split_front_matter(text: str) -> tuple[dict, str]:
    """``(metadata, body)``: the ``---`` YAML block at the top of ``text`` parsed, and the rest.
    Text without one, or whose block is not a YAML mapping, is returned whole with ``{}``.

    >>> split_front_matter("---\\ntitle: Leave policy\\n---\\n# Leave\\nText.")
    ({'title': 'Leave policy'}, '# Leave\\nText.')
    """
    m = _FRONT.match(text)
    if not m:
        return {}, text
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError:
        return {}, text
    if not isinstance(meta, dict):
        return {}, text
    return meta, text[m.end():]


def markdown_title(meta: dict, body: str, fallback: str) -> str:
    """The front matter's ``title``, else the first ``# `` heading, else ``fallback``."""
    if isinstance(meta.get("title"), (str, int, float)) and str(meta["title"]).strip():
        return str(meta["title"]).strip()
    m = _HEADING.search(body)
    return m.group(1) if m else fallback
