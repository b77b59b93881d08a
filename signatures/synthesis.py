"""Writing questions for a knowledge base's own passages (ARES §3.1), so that judges can learn it."""

import dspy


class WriteQuestion(dspy.Signature):
    """Write one question that a reader of this documentation would ask and that the passage answers.

    Ask in the reader's own words (a new employee, an operator, a customer), not by turning a
    sentence of the passage into a question, and about one concrete fact the passage states: a
    number, a default, a name, a command, a step, a rule. Then copy the answer: the shortest span of
    the passage that answers it, word for word."""

    title: str = dspy.InputField(desc="the document's title and the section's heading")
    passage: str = dspy.InputField()
    question: str = dspy.OutputField(desc="one question, under 25 words")
    answer: str = dspy.OutputField(desc="a short span copied word for word from the passage")
