"""Answer generation: closed-book, grounded with citations, and the stricter retry."""

import dspy


class AnswerClosedBook(dspy.Signature):
    """Answer the question briefly from your own knowledge, in one sentence."""

    question: str = dspy.InputField()
    answer: str = dspy.OutputField(desc="one short sentence")


class GenerateAnswer(dspy.Signature):
    """Answer the question using only the numbered context strips.

    Write one or two short sentences. After each fact, cite the strip it comes from as [1],
    [2], ... If the context does not contain the answer, say "I don't know"."""

    question: str = dspy.InputField()
    context: list[str] = dspy.InputField(desc="numbered knowledge strips, [1] first")
    answer: str = dspy.OutputField(desc="short answer citing strips as [n]")


class GenerateStrictAnswer(dspy.Signature):
    """Answer again, stating only facts present word for word in the numbered context strips.

    A previous answer made claims the context does not support; they are listed. Leave them
    out unless a strip states them. Cite every fact as [n]. When unsure, say "I don't know"."""

    question: str = dspy.InputField()
    context: list[str] = dspy.InputField(desc="numbered knowledge strips, [1] first")
    unsupported_claims: list[str] = dspy.InputField(desc="claims of the previous answer that no strip supports")
    answer: str = dspy.OutputField(desc="short answer citing strips as [n]")
