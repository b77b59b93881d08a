"""Does the pgvector knowledge base retrieve what faiss flat retrieves? recall@k on PopQA dev.

Usage::

    python -m experiments.recall_pgvector [--questions 100] [--k 3] [--ef-search 10,20,40,100]
        [--m 16] [--ef-construction 64] [--pg-url postgresql://...] [--out results/recall-pgvector]

Indexes the PopQA knowledge base (``eval_sets/popqa/knowledge_base.jsonl``) both ways: the
faiss flat index of ``python -m program`` (exact; built in the cache folder, or reused), and
a pgvector table with an HNSW index (``m``, ``ef_construction``) on the given server, or on a
throwaway ``pgserver`` one. The table is filled by the program's own ingestion; its chunk vectors
are the ones stored in the faiss index (same model, same texts), so nothing is embedded twice.
Then the first ``--questions`` PopQA dev questions (``load_questions(split="dev")``) are
searched top-``k`` in both, at each ``hnsw.ef_search``.

Figures per ef_search: recall@k of chunk ids (|pgvector ∩ faiss| / k) and of document ids
(the share of the distinct documents of faiss's top k that pgvector's top k also holds), each a
mean over questions, and the share of questions whose top-k chunk ids are identical in order.
Output: a Markdown table, and ``<out>/<YYYY-MM-DD>-<HHMMSS>.json``.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from pathlib import Path

import numpy as np

from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions
from experiments.pg_local import add_database_option, database, with_table
from program.app import resources
from program.retrieval.index import embed_text


class StoredVectors:
    """An embedder that returns the vectors a faiss knowledge base stored for its chunks
    (looked up by embedded text), embedding only texts it does not hold."""

    def __init__(self, kb):
        from program.retrieval.faiss_index import stored_vectors

        self.inner, self.name, self.dimensions = kb.embedder, kb.embedder.name, kb.embedder.dimensions
        self.table = dict(zip((embed_text(c) for c in kb.chunks), stored_vectors(kb._index)))
        self.embedded = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in texts if t not in self.table]
        if missing:
            self.embedded += len(missing)
            self.table.update(zip(missing, self.inner.encode(missing)))
        return np.stack([self.table[t] for t in texts]).astype(np.float32) if texts else \
            np.zeros((0, self.dimensions), np.float32)


def overlap(found: list[list[str]], truth: list[list[str]]) -> float:
    """Mean over questions of |set(found) ∩ set(truth)| / |set(truth)| (for chunk ids, the
    denominator is k; for document ids, the distinct documents of faiss's top k)."""
    return float(np.mean([len(set(f) & set(t)) / len(set(t)) for f, t in zip(found, truth) if t]))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.recall_pgvector", description=__doc__.split("\n")[0])
    p.add_argument("--questions", type=int, default=100)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--ef-search", default="10,20,40,100", help="comma-separated hnsw.ef_search values")
    p.add_argument("--m", type=int, default=16)
    p.add_argument("--ef-construction", type=int, default=64)
    add_database_option(p)
    p.add_argument("--out", default="results/recall-pgvector")
    args = p.parse_args(argv)
    efs = [int(x) for x in args.ef_search.split(",") if x.strip()]

    from program.retrieval.postgres import PgVectorKnowledgeBase

    faiss_kb = resources.knowledge_base()
    questions = [q["question"] for q in load_questions(split="dev")[:args.questions]]
    vectors = faiss_kb.embedder.encode(questions)
    truth = [[p.id for p in hits] for hits in faiss_kb.search_batch(questions, args.k)]
    doc = lambda ids: [[i.rsplit("#", 1)[0] for i in row] for row in ids]  # noqa: E731
    rows = []
    with database(args.pg_url) as base:
        stored = StoredVectors(faiss_kb)
        with PgVectorKnowledgeBase.build(KNOWLEDGE_BASE_PATH, with_table(base, "popqa_recall"), stored,
                                         hnsw={"m": args.m, "ef_construction": args.ef_construction},
                                         with_vocabulary=False) as kb:
            assert len(kb) == len(faiss_kb), (len(kb), len(faiss_kb))
            for ef in efs:
                kb.ef_search = ef
                found = [[p.id for p in kb.search_vector(v, args.k)] for v in vectors]
                rows.append({"ef_search": ef, f"recall@{args.k}": round(overlap(found, truth), 4),
                             f"doc recall@{args.k}": round(overlap(doc(found), doc(truth)), 4),
                             "identical top-k": round(float(np.mean([f == t for f, t in zip(found, truth)])), 4)})
    head = list(rows[0])
    table = "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                      + ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows])
    print(f"{len(questions)} PopQA dev questions, {len(faiss_kb)} chunks, HNSW m={args.m} "
          f"ef_construction={args.ef_construction}, top {args.k}, against faiss flat "
          f"({stored.embedded} chunk texts embedded anew)\n\n{table}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{datetime.now():%Y-%m-%d-%H%M%S}.json"
    path.write_text(json.dumps({"settings": vars(args), "questions": len(questions), "chunks": len(faiss_kb),
                                "rows": rows, "table": table}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
