"""Answer generation with citations to numbered knowledge strips, and the stricter retry."""

from __future__ import annotations

import re
from dataclasses import dataclass

import dspy

from program.lm.configure import supports_logprobs
from program.lm.token_scores import field_text_probability
from program.lm.words import reading
from program.stages.events import emit
from program.types import Strip
from signatures import GenerateAnswer, GenerateStrictAnswer

DRAFT_CONFIG = {"logprobs": True, "top_logprobs": 1}  # the answer's token probabilities, same call
_CITATION = re.compile(r"\[(\d+)\]")


@dataclass
class WrittenAnswer:
    """An answer and the reader's probability of its words (None when the LM gives none)."""

    text: str
    probability: float | None


def number_strips(strips: list[Strip]) -> list[str]:
    """The context as the generator sees it: ``["[1] text", "[2] text", ...]``."""
    return [f"[{i}] {s.text}" for i, s in enumerate(strips, start=1)]


def cited_numbers(text: str, n_strips: int) -> list[int]:
    """The strip numbers cited as ``[n]`` in ``text``, in order, without repeats or out-of-range ones."""
    return list(dict.fromkeys(int(n) for n in _CITATION.findall(text) if 1 <= int(n) <= n_strips))


class AnswerGenerator(dspy.Module):
    """Generate an answer from numbered strips (``GenerateAnswer``), or retry strictly.

    ``forward(question, strips)`` writes the first answer (``with_probability=True``: a
    ``WrittenAnswer`` with the reader's probability of it; ``draft`` unpacks it); ``forward(..., unsupported=[...])``
    is the capped stricter retry (``GenerateStrictAnswer``): it sees the claims the self-check
    rejected and is told to state only what the strips say. Both return the answer text.

    Example:
        >>> text = AnswerGenerator()(question="Who wrote Dune?", strips=strips)
    """

    def __init__(self):
        super().__init__()
        self.generate = dspy.Predict(GenerateAnswer)
        self.strict = dspy.Predict(GenerateStrictAnswer)

    def draft(self, question: str, strips: list[Strip]) -> tuple[str, float | None]:
        """The first answer and the reader's probability of its words, from the same call.

        Returns:
            ``(answer, probability)``: the probability is the geometric mean of the answer's
            token probabilities (``field_text_probability``), None when the LM gives none.
        """
        out = self(question=question, strips=strips, with_probability=True)
        return out.text, out.probability

    def forward(self, question: str, strips: list[Strip], unsupported: list[str] | None = None,
                with_probability: bool = False):
        with reading():  # the reader's words: a stream shows them as they are written (program.lm.words)
            out = self._write(question, number_strips(strips), unsupported, with_probability)
        text = out if isinstance(out, str) else out.text
        emit("answer", answer=text, strict=bool(unsupported), closed_book=False,
             **({} if isinstance(out, str) else {"probability": out.probability}))
        return out

    def _write(self, question: str, context: list[str], unsupported: list[str] | None, with_probability: bool):
        if with_probability:
            if not supports_logprobs():
                return WrittenAnswer(str(self.generate(question=question, context=context).answer).strip(), None)
            out = self.generate(question=question, context=context, config=DRAFT_CONFIG)
            logprobs = out.get("logprobs") if hasattr(out, "get") else None
            return WrittenAnswer(str(out.answer).strip(),
                                 field_text_probability(logprobs, "answer") if logprobs else None)
        if unsupported:
            # Deterministic retry: the instruction changes, not the sampling.
            out = self.strict(question=question, context=context, unsupported_claims=unsupported,
                              config={"temperature": 0.0})
        else:
            out = self.generate(question=question, context=context)
        return str(out.answer).strip()
