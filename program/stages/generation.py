"""Answer generation with citations to numbered knowledge strips, and the stricter retry."""

from __future__ import annotations

import re

import dspy

from program.types import Strip
from signatures import GenerateAnswer, GenerateStrictAnswer

_CITATION = re.compile(r"\[(\d+)\]")


def number_strips(strips: list[Strip]) -> list[str]:
    """The context as the generator sees it: ``["[1] text", "[2] text", ...]``."""
    return [f"[{i}] {s.text}" for i, s in enumerate(strips, start=1)]


def cited_numbers(text: str, n_strips: int) -> list[int]:
    """The strip numbers cited as ``[n]`` in ``text``, in order, without repeats or out-of-range ones."""
    return list(dict.fromkeys(int(n) for n in _CITATION.findall(text) if 1 <= int(n) <= n_strips))


class AnswerGenerator(dspy.Module):
    """Generate an answer from numbered strips (``GenerateAnswer``), or retry strictly.

    ``forward(question, strips)`` writes the first answer; ``forward(..., unsupported=[...])``
    is the capped stricter retry (``GenerateStrictAnswer``): it sees the claims the self-check
    rejected and is told to state only what the strips say. Both return the answer text.

    Example:
        >>> text = AnswerGenerator()(question="Who wrote Dune?", strips=strips)
    """

    def __init__(self):
        super().__init__()
        self.generate = dspy.Predict(GenerateAnswer)
        self.strict = dspy.Predict(GenerateStrictAnswer)

    def forward(self, question: str, strips: list[Strip], unsupported: list[str] | None = None) -> str:
        context = number_strips(strips)
        if unsupported:
            # Deterministic retry: the instruction changes, not the sampling.
            out = self.strict(question=question, context=context, unsupported_claims=unsupported,
                              config={"temperature": 0.0})
        else:
            out = self.generate(question=question, context=context)
        return str(out.answer).strip()
