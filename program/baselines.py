"""The baselines CRAG is measured against, with the same LM and result type.

``ClosedBook`` answers without retrieval; ``VanillaRAG`` answers from the top-k retrieved
passages, trusting them as they come (the "RAG" row of CRAG's Table 1).
"""

from __future__ import annotations

import dspy

from program.cost import step
from program.crag import validate_question
from program.generation import AnswerGenerator, citations_for
from program.types import CRAGResult, Strip, Trace
from signatures import AnswerClosedBook


class ClosedBook(dspy.Module):
    """Answer from the model's own knowledge (``AnswerClosedBook``), one LM call.

    Example:
        >>> ClosedBook()(question="Who wrote Dune?").answer
    """

    def __init__(self):
        super().__init__()
        self.answer = dspy.Predict(AnswerClosedBook)

    def forward(self, question: str) -> CRAGResult:
        question = validate_question(question)
        trace = Trace()
        with step(trace, "generate"):
            answer = str(self.answer(question=question).answer).strip()
        return CRAGResult(question=question, answer=answer, trace=trace, mode="closed")


class VanillaRAG(dspy.Module):
    """Retrieve ``k`` passages and answer from them with ``GenerateAnswer``, one LM call.

    Each passage (cut to ``max_chars`` characters) is one numbered context entry.

    Example:
        >>> VanillaRAG(kb, k=3)(question="Who wrote Dune?").citations
    """

    def __init__(self, knowledge_base, k: int = 3, max_chars: int = 1500):
        super().__init__()
        self.knowledge_base = knowledge_base
        self.k = k
        self.max_chars = max_chars
        self.generator = AnswerGenerator()

    def forward(self, question: str) -> CRAGResult:
        question = validate_question(question)
        trace = Trace()
        with step(trace, "retrieve"):
            passages = self.knowledge_base.search(question, self.k)
        strips = [Strip(p.id, 0, p.text[: self.max_chars], url=p.url) for p in passages]
        with step(trace, "generate"):
            answer = self.generator(question=question, strips=strips)
        return CRAGResult(question=question, answer=answer, strips=strips, trace=trace, mode="rag",
                          citations=citations_for(answer, strips))
