"""Stale and contradicting sources: the current, official passage wins (docs/how-it-works.md,
"Stale and contradicting sources").

Help centres keep deprecated and archived pages beside the current ones, and community posts
beside official answers; they disagree on the very fact asked ("keys start with ``pk_``" on
the v1 page, ``plk_`` on the v2 one). Retrieval ranks them by similarity, not by currency, so
the evaluator's grades are read together: a passage that says it is deprecated, archived,
retired or legacy, or that is a community post, is set aside when another retrieved passage
the judge scores at least ``lower`` is neither. The action is decided before this step (the
stale page is still evidence that retrieval found the topic); setting aside only keeps it out
of refinement, and the grade's reason and explanation say why.
"""

from __future__ import annotations

import re

from program.types import ChunkGrade, Passage

_STALE = re.compile(r"\b(deprecated|archived|retired|legacy|superseded|discontinued|sunset|end[- ]of[- ]life)\b", re.I)
# in the text, only a banner counts: a current page may well mention the deprecated version
_STALE_BANNER = re.compile(r"\b(DEPRECATED|ARCHIVED|RETIRED|SUPERSEDED)\b"
                           r"|\bno longer (in effect|sold|issued|supported)\b")
_COMMUNITY = re.compile(r"\b(community|forum|thread|seller tips|user tips)\b", re.I)
HEAD_CHARS = 240  # a page says what it is at its top


def source_status(passage: Passage) -> str:
    """``stale``, ``community`` or ``current``, from what the passage's source is called (id,
    title, URL: ``api-keys-v1-deprecated.md``) or a banner at the top of its text ("ARCHIVED")."""
    name = f"{passage.id} {passage.title} {passage.url}".replace("-", " ").replace("_", " ")
    if _STALE.search(name) or _STALE_BANNER.search(passage.text[:HEAD_CHARS]):
        return "stale"
    if _COMMUNITY.search(name):
        return "community"
    return "current"


def set_aside_stale(passages: list[Passage], grades: list[ChunkGrade], lower: float) -> list[ChunkGrade]:
    """Mark stale and community passages set aside when a current, official one is usable.

    Args:
        passages: the retrieved passages; grades: their grades, same order.
        lower: the evaluator's lower threshold: a passage scoring at least this is usable.

    Returns:
        The same grades; a set-aside one gets reason ``stale`` (deprecated, archived...) or
        ``contradicts-other-source`` (a community post) and an explanation starting with
        ``"set aside"`` that names the passage that won. Scores are not changed.
    """
    current = [(p, g) for p, g in zip(passages, grades) if source_status(p) == "current" and g.score >= lower]
    if not current:
        return grades
    winner = max(current, key=lambda pg: pg[1].score)[0]
    for passage, grade in zip(passages, grades):
        status = source_status(passage)
        if status == "current":
            continue
        grade.reason = "stale" if status == "stale" else "contradicts-other-source"
        what = "says it is outdated" if status == "stale" else "is a community post"
        grade.explanation = f"set aside: {what}; {winner.id} is current and official. " + grade.explanation
    return grades


def is_set_aside(grade: ChunkGrade) -> bool:
    """True for a grade ``set_aside_stale`` marked."""
    return grade.explanation.startswith("set aside")
