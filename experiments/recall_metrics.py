"""Retrieval figures from ranked chunk ids and labeled relevant ids: recall@k and MRR, per group,
and the choice of the hybrid fusion's parameters (Cormack et al. 2009's RRF, ``program.retrieval.fusion``).

A row is a dict with ``relevant`` (set of chunk ids), ``domain``, ``category``, ``split`` and
``rankings`` (mode -> list of chunk ids, best first; ``lexical+feedback<n>``: BM25 with ``n``
feedback terms of the dense ranking's first chunks, the lexical side of hybrid search when the
fusion asks for feedback). recall@k of a row = share of its relevant
ids in the top k; MRR = 1 / rank of the first relevant id in the top 10 (0 if none); each a
mean over the rows of a group.
"""

from __future__ import annotations

import itertools

from program.retrieval.fusion import FusionParams, rrf

KS = (1, 3, 5, 10)
#: the grid ``choose_fusion`` searches
GRID = {"k": (10, 30, 60, 100), "lexical": (0.5, 0.75, 1.0, 1.5, 2.0), "depth": (20, 50)}


def row_figures(ranking: list[str], relevant: set[str]) -> dict[str, float]:
    """``recall@1/3/5/10`` and ``mrr`` of one ranking against its relevant ids (non-empty)."""
    out = {f"recall@{k}": len(relevant & set(ranking[:k])) / len(relevant) for k in KS}
    first = next((i for i, c in enumerate(ranking[:10], start=1) if c in relevant), None)
    out["mrr"] = 1.0 / first if first else 0.0
    return out


def mean_figures(rows: list[dict], mode: str) -> dict[str, float]:
    """Mean :func:`row_figures` of ``mode``'s rankings over ``rows`` that have one, plus ``rows``."""
    had = [r for r in rows if mode in r["rankings"]]
    if not had:
        return {"rows": 0}
    each = [row_figures(r["rankings"][mode], r["relevant"]) for r in had]
    return {"rows": len(had), **{k: round(sum(e[k] for e in each) / len(each), 4) for k in each[0]}}


def hybrid_ranking(dense: list[str], lexical: list[str], fusion: FusionParams) -> list[str]:
    """The knowledge bases' hybrid ranking from the two full rankings (each cut to ``fusion.depth``)."""
    return [i for i, _ in rrf([dense[:fusion.depth], lexical[:fusion.depth]], [fusion.dense, fusion.lexical],
                              fusion.k)]


def lexical_ranking(row: dict, fusion: FusionParams) -> list[str]:
    """The lexical ranking hybrid search fuses under ``fusion`` (with its feedback terms or without)."""
    return row["rankings"][f"lexical+feedback{fusion.feedback}" if fusion.feedback else "lexical"]


def objective(rows: list[dict], fusion: FusionParams) -> float:
    """Mean over domains of hybrid recall@5 under ``fusion`` (each domain counts once)."""
    by_domain: dict[str, list[float]] = {}
    for r in rows:
        ranking = hybrid_ranking(r["rankings"]["dense"], lexical_ranking(r, fusion), fusion)
        by_domain.setdefault(r["domain"], []).append(row_figures(ranking, r["relevant"])["recall@5"])
    return sum(sum(v) / len(v) for v in by_domain.values()) / max(len(by_domain), 1)


def choose_fusion(rows: list[dict]) -> tuple[FusionParams, list[dict]]:
    """The :data:`GRID` point of best :func:`objective` on ``rows`` (train and dev rows only;
    ties to the earlier point, so k=60 and equal weights win a tie against larger changes).

    Returns:
        ``(best, table)``: the parameters and one dict per grid point (its settings and objective).

    Raises:
        ValueError: a row of the test split was given.
    """
    if any(r["split"] == "test" for r in rows):
        raise ValueError("choose_fusion: test rows given; choose on train and dev rows only")
    points = [FusionParams(k=60, dense=1.0, lexical=1.0, depth=50)]
    points += [FusionParams(k=k, dense=1.0, lexical=w, depth=d) for k, w, d in
               itertools.product(GRID["k"], GRID["lexical"], GRID["depth"])]
    table = [{**p.to_manifest(), "mean_recall@5": round(objective(rows, p), 4)} for p in points]
    best = max(range(len(points)), key=lambda i: (table[i]["mean_recall@5"], -i))
    return points[best], table


def grouped(rows: list[dict], modes: list[str]) -> list[dict]:
    """One figure dict per (domain, split, category) and per (domain, split) with category ``all``."""
    keys = sorted({(r["domain"], r["split"], c) for r in rows for c in (r["category"], "all")})
    out = []
    for domain, split, category in keys:
        members = [r for r in rows if r["domain"] == domain and r["split"] == split
                   and (category == "all" or r["category"] == category)]
        out.append({"domain": domain, "split": split, "category": category,
                    **{m: mean_figures(members, m) for m in modes}})
    return out
