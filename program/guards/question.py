"""The question as the program accepts it: stripped, not empty, within a length cap, printable.

Right-to-left and mixed scripts, emoji and format characters (zero-width joiners, bidi marks)
are ordinary text, but a question holding nothing else (``"\u200b\u200b"``) is empty. C0 and C1 control characters
other than tab, newline and carriage return
(a NUL, an escape sequence, a bell) are refused: no question needs them, and an escape sequence
in a question would reach terminals and logs that print it.
"""

from __future__ import annotations

import unicodedata

MAX_QUESTION_CHARS = 2000
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}
_CONTROLS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"  # Cc without tab, newline, carriage return
# Format characters (Cf: zero-width spaces and joiners, bidi marks, the BOM) show nothing: a question
# of only these is empty. Listed literally, for the schema's pattern.
# (Planes 0, 1 and 14 hold every one; scanning only them keeps the import fast.)
_INVISIBLE = "".join(c for c in map(chr, [*range(0x20000), *range(0xE0000, 0xE1000)])
                     if unicodedata.category(c) == "Cf")
# The rules of ``validate_question`` as a regular expression, for the API's schema: at least one
# character that is neither space, format nor control; a first and last character that are neither
# space nor control, at most MAX_QUESTION_CHARS from one to the other, no control character between
# them, any space around them.
QUESTION_PATTERN = (rf"^(?=[\s{_INVISIBLE}]*[^\s{_INVISIBLE}{_CONTROLS}])"
                    rf"\s*[^\s{_CONTROLS}](?:[^{_CONTROLS}]{{0,{MAX_QUESTION_CHARS - 2}}}[^\s{_CONTROLS}])?\s*$")


class QuestionError(ValueError):
    """The question is empty, longer than ``MAX_QUESTION_CHARS``, or holds a control character."""


def validate_question(question: str) -> str:
    """Return the stripped question.

    Raises:
        QuestionError: not a string, empty after stripping, over ``MAX_QUESTION_CHARS``
            characters, or holding a control character (the message gives its code point and
            position).
    """
    if question is not None and not isinstance(question, str):
        raise QuestionError(f"the question must be text, got {type(question).__name__}")
    text = (question or "").strip()
    if all(ch.isspace() or ch in _INVISIBLE for ch in text):
        raise QuestionError("the question is empty" + (" (only invisible characters)" if text else ""))
    if len(text) > MAX_QUESTION_CHARS:
        raise QuestionError(f"the question has {len(text)} characters; the limit is {MAX_QUESTION_CHARS}")
    for i, ch in enumerate(text):
        if ch not in _ALLOWED_CONTROLS and unicodedata.category(ch) == "Cc":
            raise QuestionError(f"the question holds the control character U+{ord(ch):04X} at position {i + 1}")
    return text
