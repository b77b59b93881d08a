"""Self-checks on the answer: claim extraction and claim support (Self-RAG IsSup, Asai et al. 2023 §3.1).

CheckClaimSupport asks for the evidence sentence that states the claim, not for a verdict:
asked for fully / partially / no, the small local model almost never said "fully". The quote
is then checked against the evidence and the claim (``program.stages.selfcheck.judge_support``),
which gives Self-RAG's three verdicts and cannot be fooled by an invented quote.
"""

import dspy


class ExtractClaims(dspy.Signature):
    """Split the answer into its atomic factual claims, each a short standalone sentence.

    Resolve pronouns with the question's entity. Leave out citations like [1] and hedges.
    An answer that only says it does not know has no claims: return an empty list."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    claims: list[str] = dspy.OutputField(desc="atomic factual claims")


class CheckClaimSupport(dspy.Signature):
    """Copy the sentence of the evidence that states the claim. If no sentence states it, write NONE."""

    claim: str = dspy.InputField()
    evidence: str = dspy.InputField(desc="the strips the answer cited")
    quote: str = dspy.OutputField(desc="a sentence copied from the evidence, or NONE")


class JudgeUsefulness(dspy.Signature):
    """Decide whether the answer addresses the question: it gives the person, place, thing or fact asked for, not something else and not only a refusal."""

    question: str = dspy.InputField()
    answer: str = dspy.InputField()
    useful: bool = dspy.OutputField(desc="does the answer give what the question asks for?")
