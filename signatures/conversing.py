"""Follow-up questions in a conversation (the chat endpoint, ``program.stages.followup``)."""

import dspy


class StandaloneQuestion(dspy.Signature):
    """Rewrite the user's last message as a standalone question that someone who never saw the
    conversation could answer from the documents. Replace each pronoun and reference ("it",
    "that setting", "the second option") with what it names in the conversation, and fill in
    what an ellipsis leaves out ("and for Deployments?"). Ask exactly what the user asks: add no
    answer, no fact and no detail the user did not ask about. A message that already stands on
    its own is returned as it is."""

    conversation: str = dspy.InputField(desc="the earlier turns, oldest first, one per line as 'user: ...' or "
                                             "'assistant: ...'")
    followup: str = dspy.InputField(desc="the user's last message")
    standalone_question: str = dspy.OutputField(desc="one self-contained question")
