"""The question as the program accepts it: stripped, not empty, within a length cap."""

from __future__ import annotations

MAX_QUESTION_CHARS = 2000


class QuestionError(ValueError):
    """The question is empty or longer than ``MAX_QUESTION_CHARS``."""


def validate_question(question: str) -> str:
    """Return the stripped question; raise ``QuestionError`` if empty or over the length cap."""
    text = (question or "").strip()
    if not text:
        raise QuestionError("the question is empty")
    if len(text) > MAX_QUESTION_CHARS:
        raise QuestionError(f"the question has {len(text)} characters; the limit is {MAX_QUESTION_CHARS}")
    return text
