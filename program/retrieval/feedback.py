"""Pseudo-relevance feedback for the lexical side of hybrid search.

A reader's question and the documents often name one thing with different words (a
vocabulary mismatch); BM25 over the question's words then ranks whatever shares its common
words. The dense ranking usually lands in the right neighbourhood even so. Pseudo-relevance
feedback (Rocchio 1971; Lavrenko and Croft 2001, RM3 as Abdul-Jaleel et al. 2004 run it)
takes the best-ranked documents as relevant and adds their characteristic terms to the
query: here the ``terms`` tokens of the dense ranking's first ``FEEDBACK_CHUNKS`` chunks with
the highest ``(occurrences in those chunks) * ln(N / df)``, not already in the question, ties
to the token that sorts first by code point. The lexical ranking of hybrid search reads the
question's tokens plus these, in both backends (:mod:`program.retrieval.index`,
:mod:`program.retrieval.postgres.hybrid`); ``mode="lexical"`` (no dense ranking) reads the
question alone.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable

FEEDBACK_CHUNKS = 3  # dense results read for feedback terms


def feedback_terms(question_tokens: Iterable[str], chunk_tokens: Iterable[list[str]], df: Callable[[str], int],
                   chunks: int, n: int) -> list[str]:
    """The ``n`` feedback tokens (rule in the module docstring), best first.

    Args:
        question_tokens: the question's tokens (:func:`program.retrieval.lexical.tokens`).
        chunk_tokens: the tokens of each feedback chunk (the top of the dense ranking).
        df: a token's document frequency among the knowledge base's ``chunks`` chunks (0: unknown).
        chunks: N, the number of chunks.
        n: how many to return (0 -> ``[]``).
    """
    if n <= 0:
        return []
    asked = set(question_tokens)
    counts = Counter(t for tokens in chunk_tokens for t in tokens if t not in asked)
    weights = {t: c * math.log(chunks / df(t)) for t, c in counts.items() if 0 < df(t) <= chunks}
    return sorted(weights, key=lambda t: (-weights[t], t))[:n]
