"""The claim check measured as the program runs it: continuing the reader's call.

At run time ``CheckClaimSupport`` is the next turn of the reader's conversation
(``program.lm.continuation``): the reader read the strips, wrote the answer citing them, and the
check names the cited strip instead of receiving it again. A support row (claim, evidence,
label) has no reader's call, so :func:`reading_for` writes the one it stands for: the reader's
prompt (``GenerateAnswer``, its compiled demos) over the evidence as strip ``[1]``, and the
claim as the answer citing ``[1]``. :class:`ContinuedCheck` asks the check in that
conversation; the compile measures the support predictor through it (``optimize.compile``).
"""

from __future__ import annotations

import dspy

from program.lm.adapter import inputs_as_data
from program.lm.configure import CRITIQUE_CONFIG
from program.lm.continuation import Reading, RecordingChatAdapter, continuing
from program.stages.generation import number_strips
from program.stages.selfcheck import cited_reference
from program.types import Strip
from signatures import GenerateAnswer

# A support row has no question; the check reads the claim, not the question.
ROW_QUESTION = "What do the context strips say?"


def reading_for(claim: str, evidence: str, reader: dspy.Predict | None = None, question: str | None = None) -> Reading:
    """The reader's call a support row stands for: ``reader``'s prompt (default: an uncompiled
    ``GenerateAnswer``) for ``question`` (default ``ROW_QUESTION``) over ``[evidence]`` as strip
    ``[1]``, and ``"{claim} [1]"`` as its reply, both formatted as the program's adapter formats them."""
    reader = reader or dspy.Predict(GenerateAnswer)
    adapter = RecordingChatAdapter()
    inputs = {"question": question or ROW_QUESTION, "context": number_strips([Strip("row", 0, evidence)])}
    messages = adapter.format(reader.signature, reader.demos, inputs)
    reply = adapter.format_assistant_message_content(reader.signature, {"answer": f"{claim} [1]"})
    return Reading(tuple(messages), reply)


class ContinuedCheck(dspy.Module):
    """``check`` (a ``CheckClaimSupport`` predictor) asked as the program asks it: the next turn
    of :func:`reading_for`'s conversation, the evidence named as "the context strip [1] above".

    ``forward(claim, evidence, question=None) -> dspy.Prediction`` with ``quote``, as ``check``
    returns it (``question``: the one the claim answers, when the row has it).
    """

    def __init__(self, check: dspy.Predict, reader: dspy.Predict | None = None):
        super().__init__()
        self.check = check
        self.reader = reader

    def forward(self, claim: str, evidence: str, question: str | None = None):
        reading = reading_for(claim, evidence, self.reader, question)
        with inputs_as_data(RecordingChatAdapter), continuing(reading, evidence=cited_reference([1])):
            return self.check(claim=claim, evidence=evidence, config=CRITIQUE_CONFIG)
