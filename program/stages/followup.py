"""A follow-up in a conversation rewritten into the standalone question the route answers.

Retrieval reads the question alone: "and what is its default value?" finds nothing about the
setting the user asked about one turn before. Conversational question rewriting (CANARD,
Elgohary et al. 2019; TREC CAsT's manual rewrites, Dalton et al. 2020) turns the last message
into the question a reader who saw the conversation would write; CRAG then runs on it as on any
question, and the trace keeps both.
"""

from __future__ import annotations

from collections.abc import Sequence

import dspy
from dspy.utils.exceptions import AdapterParseError

from program.guards.cost import step
from program.guards.question import validate_question
from program.stages.events import emit
from program.text import clean_copy
from program.types import Trace
from signatures import StandaloneQuestion

TURNS_READ = 6  # the last turns are what a follow-up refers to; older ones cost prompt tokens
TURN_CHARS = 600  # an assistant's long answer: its start names what it is about


def conversation_text(history: Sequence[tuple[str, str]]) -> str:
    """The last ``TURNS_READ`` turns as ``role: text`` lines, each cut to ``TURN_CHARS`` characters."""
    lines = []
    for role, text in list(history)[-TURNS_READ:]:
        text = " ".join(text.split())
        lines.append(f"{role}: {text[:TURN_CHARS]}{'…' if len(text) > TURN_CHARS else ''}")
    return "\n".join(lines)


class FollowUp(dspy.Module):
    """``StandaloneQuestion`` over a conversation: ``forward(history, followup) -> str``.

    ``history`` is the earlier turns as ``(role, text)`` pairs, role ``user`` or ``assistant``,
    oldest first. No earlier user turn: ``followup`` is returned as it is, with no LM call. A
    rewrite that is empty, cannot be parsed, or breaks the question rules
    (``validate_question``: too long, control characters) also leaves ``followup`` as it is: the
    user's own words are a worse query than a good rewrite and a better one than a broken one.
    """

    def __init__(self):
        super().__init__()
        self.rewrite = dspy.Predict(StandaloneQuestion)

    def forward(self, history: Sequence[tuple[str, str]], followup: str) -> str:
        standalone = self._standalone(history, followup)
        emit("followup", asked=followup, standalone=standalone)
        return standalone

    def standalone(self, asked: str, history: Sequence[tuple[str, str]], trace: Trace) -> str:
        """The follow-up ``asked`` as a standalone question, in a ``followup`` step with a trace
        note (no LM call, and no step, without an earlier user turn)."""
        if not any(role == "user" for role, _ in history):
            return asked
        with step(trace, "followup"):
            question = self(history=list(history), followup=asked)
        trace.note(f"follow-up {asked!r} read as {question!r}")
        return question

    def _standalone(self, history: Sequence[tuple[str, str]], followup: str) -> str:
        if not any(role == "user" for role, _ in history):
            return followup
        try:
            out = self.rewrite(conversation=conversation_text(history), followup=followup,
                               config={"temperature": 0.0})
            return validate_question(clean_copy(str(out.standalone_question)))
        except (AdapterParseError, ValueError, TypeError, AttributeError, KeyError):  # a QuestionError too
            return followup
