"""Retrieve or not: Self-RAG's Retrieve token (Asai et al. 2023, §3.1), before any retrieval.

Self-RAG's critic emits Retrieve = yes | no | continue; here it judges the question alone
(there is no earlier segment to continue from), as one boolean: the small local model
(Qwen2.5-Coder-1.5B) gives usable booleans where categories and scores come out all one
value. A question that needs no retrieval is answered closed-book by ``AnswerClosedBook``
(``signatures.answering``), so this signature outputs the decision and nothing else.
"""

import dspy


class DecideRetrieval(dspy.Signature):
    """Decide whether answering the question needs facts looked up in documents.

    Facts about named people, places, works, products or policies need retrieval. Greetings,
    thanks, arithmetic, and rewording or translating text given in the question do not. When
    unsure, answer true."""

    question: str = dspy.InputField()
    needs_retrieval: bool = dspy.OutputField(desc="true unless the question can be answered without any documents")
