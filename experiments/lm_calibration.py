"""The LM's passage grade, calibrated per question, against the trained judges on a labeled domain.

``python -m experiments.lm_calibration --set kubernetes [--split test] [--limit 30] [--random 2]``

A small LM says "yes" to nearly every passage. Contextual calibration (Zhao et al., ICML 2021) and
batch calibration (Zhou et al., ICLR 2024) remove that bias by subtracting the model's score on
content-free or random inputs. Here, for each sampled query that needs retrieval, the compiled
``GradeRetrieval`` grades its top-5 knowledge-base chunks and ``--random`` chunks of other documents
of the same knowledge base, read from token probabilities (``program.stages.evaluator.grade_probabilities``:
``0.6 p(answers) + 0.4 p(same entity)``), and the measured scores are:

==================  ==========================================================================
``lm``              the LM's score as the program reads it
``lm_answers``      ``p(answers_question)`` alone
``lm_calibrated``   ``lm`` minus its mean on the random chunks for the same question
``lm_batch``        ``lm`` minus its mean over the question's own top-5 (batch calibration)
``trained``         the committed compile's passage judge (no LM call)
``adapted``         the judges adapted to this knowledge base, when ``optimize.compile --kb`` built them
==================  ==========================================================================

Each is reported as the ROC AUC over the top-5 chunks (relevant: in ``relevant_chunk_ids``) and
as the ROC AUC of a query's best top-3 score between queries expected CORRECT and INCORRECT. No
threshold is chosen, so the sampled rows choose nothing. Writes ``summary.json`` and ``rows.csv``
under ``--out`` (default ``reports/lm-calibration/<set>-<split>``). About 7 LM calls a query.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import dspy
import numpy as np

from program.lm.options import add_lm_options, lm_from
from program.atomic import write_atomic

K = 5  # the passages a query's relevance AUC reads (the transfer run's top-5)
TOP = 3  # the program's top-k, for the query-level best score


def _lm_score(grader, question: str, text: str, max_chars: int = 700) -> tuple[float, float]:
    """``(score, p(answers))`` of one LM grade from token probabilities; ``(0, 0)`` when unparsed."""
    from program.lm.adapter import inputs_as_data
    from program.stages.evaluator import LOGPROBS_CONFIG, grade_probabilities, score_grade

    try:
        with inputs_as_data():
            pred = grader(question=question, passage=text[:max_chars], config=LOGPROBS_CONFIG)
    except Exception:  # an unparsed grade scores 0, as in the program
        return 0.0, 0.0
    same, answers, outdated = grade_probabilities(pred)
    return float(score_grade(same, answers, outdated)[0]), float(answers)


def _chunk_rows(q: dict, hits: list, relevant: list[bool], graded: list[tuple[float, float]],
                random_scores: list[float], trained: dict) -> list[dict]:
    """One row per graded top-``K`` chunk: its labels, the LM's scores (raw, less the random and batch means), the
    judges'."""
    batch_mean = float(np.mean([s for s, _ in graded])) if graded else 0.0
    random_mean = float(np.mean(random_scores)) if random_scores else 0.0
    rows = []
    for rank, (h, (score, answers)) in enumerate(zip(hits, graded)):
        rows.append({"query": q["id"], "category": q.get("category", ""), "expected_action": q["expected_action"],
                     "rank": rank, "chunk": h.id, "relevant": relevant[rank], "lm": round(score, 4),
                     "lm_answers": round(answers, 4), "lm_calibrated": round(score - random_mean, 4),
                     "lm_batch": round(score - batch_mean, 4), "random_mean": round(random_mean, 4),
                     **{k: round(float(v[rank]), 4) for k, v in trained.items()}})
    return rows


def _best_in_top(rows: list[dict], score: str) -> dict[str, float]:
    """Query id -> the highest ``score`` among its top-``TOP`` chunks."""
    best = {}
    for r in rows:
        if r["rank"] < TOP:
            best[r["query"]] = max(best.get(r["query"], -1.0), r[score])
    return best


def measure(name: str, split: str, limit: int, n_random: int, seed: int = 0, log=print) -> tuple[dict, list[dict]]:
    """Grade each sampled query's top-``K`` chunks and ``n_random`` chunks of other documents.

    Returns:
        ``(summary, rows)``: ``summary`` maps each score name to ``{"passage_auc", "query_auc"}``
        plus counts; ``rows`` is one dict per graded top-``K`` chunk.

    Raises:
        KeyError: ``name`` is not a labeled domain.
    """
    from eval_sets.domains import DOMAINS, load_rows
    from optimize.eval_data import stratified_sample
    from optimize.training.pairs import chunk_key
    from program.adaptation.calibrate import auc
    from program.app import resources
    from program.app.compiled import STATE_FILE, load_state
    from program.judges.adapted import load_adapted
    from program.judgments import PASSAGE
    from program.judges.store import load_judges
    from program.stages.crag import CRAG

    kb = resources.knowledge_base(DOMAINS[name].kb_dir)
    queries = [r for r in load_rows(name, "queries", split) if r.get("needs_retrieval", True)]
    queries = stratified_sample(queries, limit, seed=seed, key="category") if limit else queries
    program = CRAG(knowledge_base=None, decide_retrieval=True)
    load_state(program, f"compiled/{STATE_FILE}")
    grader = program.evaluator.grade
    judges = {"trained": load_judges("compiled"), "adapted": load_adapted("compiled", kb)}
    judges = {k: j for k, j in judges.items() if j is not None}
    rng = random.Random(seed)
    rows, started = [], time.perf_counter()
    for i, q in enumerate(queries, 1):
        hits = kb.search(q["question"], K)
        docs = {chunk_key(h.id).rpartition("#")[0] for h in hits}
        pool = [c for c in kb.chunks if c.doc_id not in docs]
        random_scores = [_lm_score(grader, q["question"], c.text)[0]
                         for c in rng.sample(pool, min(n_random, len(pool)))]
        graded = [_lm_score(grader, q["question"], h.text) for h in hits]
        relevant = set(q.get("relevant_chunk_ids") or []) if q.get("answerable", True) else set()
        trained = {k: j.score(PASSAGE, question=q["question"], passages=hits) for k, j in judges.items()}
        rows += _chunk_rows(q, hits, [chunk_key(h.id) in relevant for h in hits], graded, random_scores, trained)
        log(f"{name}: {i}/{len(queries)} queries ({time.perf_counter() - started:.0f} s)")
    names = ["lm", "lm_answers", "lm_calibrated", "lm_batch", *judges]
    summary = {"set": name, "split": split, "queries": len(queries), "passages": len(rows),
               "relevant_passages": sum(r["relevant"] for r in rows), "random_per_query": n_random,
               "seconds": round(time.perf_counter() - started, 1)}
    for s in names:
        best = _best_in_top(rows, s)
        expected = {r["query"]: r["expected_action"] for r in rows}
        ids = [q for q in best if expected[q] in ("correct", "incorrect")]
        summary[s] = {"passage_auc": auc([r["relevant"] for r in rows], [r[s] for r in rows]),
                      "query_auc": auc([expected[q] == "correct" for q in ids], [best[q] for q in ids])}
    return summary, rows


def main(argv: list[str] | None = None) -> int:
    from eval_sets.domains import DOMAINS

    parser = argparse.ArgumentParser(prog="python -m experiments.lm_calibration", description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", required=True, help=f"a labeled domain: {', '.join(DOMAINS)}")
    parser.add_argument("--split", default="test", choices=("train", "dev", "test"))
    parser.add_argument("--limit", type=int, default=30, help="queries, sampled in proportion to categories (0: all)")
    parser.add_argument("--random", type=int, default=2, help="random chunks of other documents graded per query")
    add_lm_options(parser, role="the LM whose grades are calibrated", cache=False)
    parser.add_argument("--out", default=None, help="folder (default reports/lm-calibration/<set>-<split>)")
    args = parser.parse_args(argv)
    if args.set not in DOMAINS:
        print(f"error: --set {args.set!r} is not a labeled domain; choose from {', '.join(DOMAINS)}", file=sys.stderr)
        return 2
    if args.limit < 0 or args.random < 0:
        print("error: --limit and --random must be 0 or more", file=sys.stderr)
        return 2
    lm = lm_from(args)
    with dspy.context(lm=lm.copy(temperature=0.0)):
        summary, rows = measure(args.set, args.split, args.limit, args.random,
                                log=lambda m: print(m, file=sys.stderr))
    out = Path(args.out or f"reports/lm-calibration/{args.set}-{args.split}")
    out.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    for name, text in (("summary.json", json.dumps(summary, indent=2) + "\n"),
                       ("rows.csv", pd.DataFrame(rows).to_csv(index=False))):
        write_atomic(out / name, text)
    print("| score | passage AUC | query AUC (correct vs incorrect) |\n|---|---|---|")
    for s, v in summary.items():
        if isinstance(v, dict):
            print(f"| {s} | {v['passage_auc']} | {v['query_auc']} |")
    print(f"saved {out}/summary.json ({summary['queries']} queries, {summary['passages']} passages, "
          f"{summary['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
