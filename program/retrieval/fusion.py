"""Reciprocal rank fusion: one ranking out of several, by rank alone.

Cormack, Clarke and Büttcher (2009), "Reciprocal Rank Fusion outperforms Condorcet and
individual Rank Learning Methods": an item at rank r (1 = best) of ranking i scores
``w_i / (k + r)``; its fused score is the sum over the rankings that hold it. Scores of
different retrievers (a cosine, a BM25 weight) never meet, so neither needs calibrating.
The same rule fuses the dense and the lexical ranking of one query (hybrid search, in both
backends: :mod:`program.retrieval.index`, :mod:`program.retrieval.postgres.store`) and the
question's results with its rewrite's (CRAG's re-retrieval, ``program.stages.crag``).

``HYBRID`` holds the weights the knowledge bases use, chosen on the labeled domains' train and
dev rows (``python -m experiments.retrieval_recall --choose``; ``docs/lab/2026-12-05-hybrid-retrieval.md``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FusionParams:
    """How hybrid search fuses its two rankings.

    Args:
        k: RRF's rank constant (60 in Cormack et al.); larger flattens the head of each ranking.
        dense: weight of the dense (cosine) ranking.
        lexical: weight of the lexical (BM25) ranking.
        depth: candidates taken from each ranking before fusing (at least the ``k`` asked).
        feedback: terms of the dense ranking's first chunks added to the lexical query
            (pseudo-relevance feedback, :mod:`program.retrieval.feedback`); 0 for none.

    Raises:
        ValueError: ``k`` or ``depth`` below 1, a negative weight or ``feedback``, or both weights 0.
    """

    k: int = 60
    dense: float = 1.0
    lexical: float = 1.0
    depth: int = 50
    feedback: int = 0

    def __post_init__(self):
        if self.k < 1 or self.depth < 1 or min(self.dense, self.lexical) < 0 or self.dense + self.lexical <= 0 \
                or self.feedback < 0:
            raise ValueError(f"fusion parameters out of range: k={self.k}, depth={self.depth} (>= 1), "
                             f"weights dense={self.dense}, lexical={self.lexical} (>= 0, not both 0), "
                             f"feedback={self.feedback} (>= 0)")

    def to_manifest(self) -> dict:
        return {"rule": "rrf", "k": self.k, "dense": self.dense, "lexical": self.lexical, "depth": self.depth,
                "feedback": self.feedback}


#: the knowledge bases' default, the best mean hybrid recall@5 over the domains' train and dev
#: rows (0.802; Cormack et al.'s k=60 with equal weights: 0.787): ``docs/lab/2026-12-05-hybrid-retrieval.md``
HYBRID = FusionParams(k=10, dense=1.0, lexical=0.75, depth=50)

#: search modes every knowledge base takes (``search(query, k, mode=...)``)
MODES = ("hybrid", "dense", "lexical")


def check_mode(mode: str) -> str:
    """``mode`` itself when it is one of ``MODES``. Raises ValueError naming the modes otherwise."""
    if mode not in MODES:
        raise ValueError(f"search mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def rrf(rankings, weights=None, k: int = 60) -> list[tuple[object, float]]:
    """Fuse ``rankings`` (each a sequence of hashable ids, best first) by reciprocal rank.

    Args:
        rankings: lists of ids; an id repeated within one list counts at its first rank.
        weights: one weight per ranking (default all 1.0).
        k: the rank constant.

    Returns:
        ``(id, score)`` pairs, highest fused score first; ties go to the id met first when the
        rankings are read in turn, rank by rank (so equal weights interleave them).

    Raises:
        ValueError: as many weights as rankings are needed.
    """
    weights = [1.0] * len(rankings) if weights is None else list(weights)
    if len(weights) != len(rankings):
        raise ValueError(f"rrf: {len(weights)} weights for {len(rankings)} rankings")
    scores: dict[object, float] = {}
    first: dict[object, tuple[int, int]] = {}
    for i, (ranking, weight) in enumerate(zip(rankings, weights)):
        seen = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            first[item] = min(first.get(item, (rank, i)), (rank, i))
    return sorted(scores.items(), key=lambda kv: (-kv[1], first[kv[0]]))


def fuse_passages(lists, weights=None, k: int = 60) -> list:
    """:func:`rrf` over lists of :class:`~program.types.Passage` (by ``id``); each fused id keeps
    the passage object of the first list holding it, so its ``score`` stays that retriever's
    (a cosine for knowledge-base passages)."""
    by_id = {}
    for passages in lists:
        for p in passages:
            by_id.setdefault(p.id, p)
    return [by_id[i] for i, _ in rrf([[p.id for p in ps] for ps in lists], weights, k)]
