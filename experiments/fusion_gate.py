"""How far any per-question choice between dense and hybrid search can lift recall@5.

Usage::

    python -m experiments.fusion_gate [--out reports/retrieval-recall/fusion-gate.json]

No LM. The rows and rankings are those of :mod:`experiments.retrieval_recall` (the labeled
domains' queries with ``relevant_chunk_ids``, PopQA train and dev). Two figures per domain,
split and category (all rows, vocabulary-mismatch rows), recall@5 beside dense and hybrid:

- **oracle**: each question takes whichever of its dense and hybrid (``fusion.HYBRID``)
  rankings has the higher recall@5. No rule that chooses between the two rankings per question
  can beat it, so it bounds what such a choice (query-performance-predicted fusion) could add
  with these two retrievers; intermediate weights give other rankings, which it does not bound.
- **gate**: the lexical weight falls to ``low`` when the dense and lexical top ``n`` share
  fewer than ``share`` of their chunks (the two retrievers disagree, so BM25 is taken for
  noise). ``n``, ``share`` and ``low`` are chosen on train and dev rows only, by the fusion's
  own objective (mean over domains of recall@5); test rows are reported, never used.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from experiments import recall_metrics as rm
from experiments.retrieval_recall import collect
from program.retrieval.fusion import HYBRID, rrf

GRID = {"n": (5, 10, 20), "share": (0.1, 0.2, 0.3), "low": (0.0, 0.25, 0.5)}


def recall5(ranking: list[str], relevant: set[str]) -> float:
    return rm.row_figures(ranking, relevant)["recall@5"]


def hybrid(row: dict, lexical_weight: float) -> list[str]:
    """The row's hybrid ranking under ``fusion.HYBRID`` with another lexical weight."""
    depth = HYBRID.depth
    return [i for i, _ in rrf([row["rankings"]["dense"][:depth], row["rankings"]["lexical"][:depth]],
                              [HYBRID.dense, lexical_weight], HYBRID.k)]


def gated(row: dict, n: int, share: float, low: float) -> list[str]:
    """:func:`hybrid` at ``HYBRID.lexical`` when the two top ``n`` share at least ``share`` of their
    chunks, at ``low`` otherwise."""
    common = len(set(row["rankings"]["dense"][:n]) & set(row["rankings"]["lexical"][:n])) / n
    return hybrid(row, HYBRID.lexical if common >= share else low)


def oracle(row: dict) -> list[str]:
    return max((row["rankings"]["dense"], hybrid(row, HYBRID.lexical)), key=lambda r: recall5(r, row["relevant"]))


def choose_gate(rows: list[dict]) -> tuple[dict, float]:
    """The :data:`GRID` point of best mean-over-domains recall@5 on ``rows`` (train and dev only).

    Raises:
        ValueError: a test row was given."""
    if any(r["split"] == "test" for r in rows):
        raise ValueError("choose_gate: test rows given; choose on train and dev rows only")
    best, score = None, -1.0
    for n, share, low in itertools.product(GRID["n"], GRID["share"], GRID["low"]):
        by: dict[str, list[float]] = {}
        for r in rows:
            by.setdefault(r["domain"], []).append(recall5(gated(r, n, share, low), r["relevant"]))
        value = sum(sum(v) / len(v) for v in by.values()) / len(by)
        if value > score:
            best, score = {"n": n, "share": share, "low": low}, value
    return best, round(score, 4)


def figures(rows: list[dict], gate: dict) -> list[dict]:
    """recall@5 of dense, hybrid, gate and oracle per domain, split (train+dev, test) and category."""
    out = []
    for split, domain, category in itertools.product(("train+dev", "test"),
                                                     ("adversarial", "kubernetes", "handbook", "popqa"),
                                                     ("all", "vocabulary-mismatch")):
        group = [r for r in rows if r["domain"] == domain and r["split"] in split.split("+")
                 and category in ("all", r["category"])]
        if not group:
            continue
        mean = lambda rank: round(sum(recall5(rank(r), r["relevant"]) for r in group) / len(group), 4)  # noqa: E731
        out.append({"split": split, "domain": domain, "category": category, "rows": len(group),
                    "dense": mean(lambda r: r["rankings"]["dense"]),
                    "hybrid": mean(lambda r: hybrid(r, HYBRID.lexical)),
                    "gate": mean(lambda r: gated(r, **gate)), "oracle": mean(oracle)})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.fusion_gate", description=__doc__.split("\n")[0])
    p.add_argument("--popqa-train", type=int, default=200, help="PopQA train questions among the rows")
    p.add_argument("--out", type=Path, default=Path("reports/retrieval-recall/fusion-gate.json"))
    args = p.parse_args(argv)
    rows, _ = collect(args)
    gate, score = choose_gate([r for r in rows if r["split"] != "test"])
    table = figures(rows, gate)
    print(f"gate chosen on train and dev rows: {gate} (objective {score})")
    print("| split | domain | category | rows | dense r@5 | hybrid r@5 | gate r@5 | oracle r@5 |\n"
          "|---|---|---|---|---|---|---|---|")
    for f in table:
        print(f"| {f['split']} | {f['domain']} | {f['category']} | {f['rows']} | {f['dense']} | {f['hybrid']} "
              f"| {f['gate']} | {f['oracle']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"gate": gate, "objective": score, "figures": table}, indent=1) + "\n",
                        encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
