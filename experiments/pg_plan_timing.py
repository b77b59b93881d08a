"""pgvector's hybrid statement timed with a custom plan per call against its prepared generic plan.

The program prepares the fused statement once per connection and runs its generic plan
(``PgVectorKnowledgeBase.search_fused``). This times both ways through the knowledge base's own
connection pool, each question in turn with both statements and dense search, the order
alternating, so that both see the same server and the same cache:

    python -m experiments.pg_plan_timing 'postgresql://…?table=bench_100000_seed0_hybrid' [--questions 200] [--rounds 3]

(the benchmark's tables stay in the server given to ``python -m experiments.bench_retrieval
--pg-url``). Prints p50 and p90 in ms of the per-question median over the rounds, and how many
top-10 lists the two plans return alike.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv: list[str] | None = None) -> int:
    from eval_sets.popqa import load_questions
    from program.retrieval import get_embedder
    from program.retrieval.fusion import HYBRID
    from program.retrieval.postgres import PgVectorKnowledgeBase, hybrid

    p = argparse.ArgumentParser(prog="python -m experiments.pg_plan_timing", description=__doc__.split("\n")[0])
    p.add_argument("url", help="a pgvector knowledge base with its postings")
    p.add_argument("--questions", type=int, default=200, help="PopQA dev questions")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    questions = [q["question"] for q in load_questions(split="dev")][: args.questions]
    embedder = get_embedder()
    kb = PgVectorKnowledgeBase.connect(args.url, embedder)
    vectors = [np.asarray(v, dtype=np.float32) for v in embedder.encode(questions)]

    def custom(question, vector):
        params = hybrid.parameters(question, vector, 10, "hybrid", HYBRID)
        statement = hybrid.fused_query(kb.url.table, [])

        def run(conn):
            conn.execute(f"SET LOCAL hnsw.ef_search = {max(kb.ef_search, params['dense_depth'])}")
            conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")
            return [r[0] for r in conn.execute(statement, params).fetchall()]
        return kb._db.run(run)

    ways = {"hybrid, a custom plan per call": custom,
            "hybrid, prepared, generic plan": lambda q, v: [x.id for x in kb.search_fused(q, v, 10, "hybrid")],
            "dense": lambda q, v: [x.id for x in kb.search_vector(v, 10)]}
    ms = {name: np.zeros((args.rounds, len(questions))) for name in ways}
    results = {name: [None] * len(questions) for name in ways}
    for r in range(args.rounds):
        for i, (q, v) in enumerate(zip(questions, vectors)):
            for name in (list(ways) if (i + r) % 2 else list(reversed(ways))):
                started = time.perf_counter()
                results[name][i] = ways[name](q, v)
                ms[name][r, i] = (time.perf_counter() - started) * 1000
    for name, t in ms.items():
        per_question = np.median(t, axis=0)
        print(f"{name}: p50 {np.median(per_question):.2f} ms, p90 {np.percentile(per_question, 90):.2f} ms")
    same = sum(a == b for a, b in zip(*(results[n] for n in list(ways)[:2])))
    print(f"top-10 lists alike under both plans: {same} of {len(questions)}")
    kb.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
