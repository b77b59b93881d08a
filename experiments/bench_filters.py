"""Filtered search at scale, both backends: recall of the filtered top k against brute force, and latency.

Usage::

    python -m experiments.bench_filters [--chunks 100000] [--files 1000] [--shares 0.01,0.1,0.5]
        [--queries 100] [--k 5] [--embed-max 3000] [--seed 0] [--pg-url postgresql://...] [--out DIR]

Corpus: ``experiments.bench_retrieval``'s synthetic chunks (PopQA sentences recombined; the first
``--embed-max`` embedded for real, the rest of the vectors mixed from them, cached in
``.cache/bench-retrieval/``), spread over ``--files`` corpus files of equal size
(``file-0042.md`` in a folder ``docs``: chunk j in file ``j * files // chunks``). A filter
keeping a share s of the chunks is a path filter naming ``s * files`` files picked at random
(``--seed``), as a request's ``{"paths": [...]}`` would; the query questions are PopQA's.

Backends, each searched through its own ``search(q, k, mode, within=...)``:

* ``faiss``: the knowledge base over a flat index and its BM25 index (``KnowledgeBase``), the
  filter applied by an ID selector over the kept chunks (dense) and a mask over BM25's scores;
* ``pgvector``: the PostgreSQL knowledge base (server of ``--pg-url``, or a throwaway ``pgserver``
  one), each file published by the program's ingestion path, the filter in the ``WHERE`` of
  both rankings of the one hybrid statement (and of the dense query).

Measured per backend, mode (``dense``, ``hybrid``) and share (and unfiltered): the median and 95th
percentile milliseconds of the search alone (the query's embedding is handed over, as in
``bench_retrieval``), the milliseconds resolving the filter against the files takes (once per
question: ``select``; pgvector reads its files table), and the recall of the filtered top k
against brute force: exact cosine over every kept vector (dense); for hybrid, the dense and BM25
rankings over every kept chunk (BM25 scored by ``bm25s`` over the whole corpus, masked), fused
as ``HYBRID`` fuses them.

Writes ``results.json`` and ``results.md`` into ``--out`` (default ``reports/filters``).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from experiments.bench_retrieval import (CACHE_DIR, HandedEmbedder, corpus_vectors, embedded_vectors, machine,
                                         synthetic_chunks)
from experiments.pg_local import add_database_option, database, with_table
from program.retrieval.chunking import Chunk
from program.retrieval.embedding import get_embedder
from program.retrieval.faiss_index import IndexSpec, build_index
from program.retrieval.filters import DocumentFilter
from program.retrieval.fusion import HYBRID, rrf
from program.retrieval.index import KnowledgeBase, embed_text
from program.retrieval.lexical import PARAMS as LEXICAL_PARAMS, LexicalIndex, tokens


def file_of(j: int, chunks: int, files: int) -> str:
    return f"docs/file-{j * files // chunks:04d}.md"


def with_files(chunks: list[Chunk], files: int) -> list[Chunk]:
    """The chunks, each with its corpus file as ``source_path`` (and ``doc_id``)."""
    n = len(chunks)
    return [Chunk(c.chunk_id, file_of(j, n, files), c.text, c.title, source_path=file_of(j, n, files))
            for j, c in enumerate(chunks)]


def faiss_kb(chunks: list[Chunk], vecs: np.ndarray, handed: HandedEmbedder, files: int) -> KnowledgeBase:
    counts: dict[str, int] = {}
    for c in chunks:
        counts[c.source_path] = counts.get(c.source_path, 0) + 1
    manifest = {"index": IndexSpec("flat").to_manifest(), "lexical": {"library": "bm25s", **LEXICAL_PARAMS},
                "files": {f: "synthetic" for f in counts}, "file_chunks": counts,
                "file_modified": {f: "2026-01-01T00:00:00+00:00" for f in counts}}
    lexical = LexicalIndex.build([embed_text(c) for c in chunks])
    return KnowledgeBase(build_index(IndexSpec("flat"), vecs), chunks, manifest, CACHE_DIR, handed, lexical=lexical)


def pg_kb(url: str, chunks: list[Chunk], vecs: np.ndarray, handed: HandedEmbedder):
    """A pgvector knowledge base holding ``chunks`` as their files, published file by file as an
    index run publishes them (staged in batches, one transaction per file); one already built at
    ``url`` with as many chunks (a server given with ``--pg-url``) is reused."""
    from experiments.bench_pgvector import create_tables
    from program.retrieval.postgres import PgVectorKnowledgeBase, postings
    from program.retrieval.postgres.connection import Database
    from program.retrieval.postgres.ingest import (CHUNK_COLUMNS, COPY_TYPES, chunking_key, copy_rows,
                                                   publish_file, staged_row)
    from program.retrieval.postgres.url import DatabaseURL

    try:
        kb = PgVectorKnowledgeBase.connect(url, handed)
        if len(kb) == len(chunks):
            return kb
        kb.close()
    except Exception:  # not built yet
        pass
    db = Database(DatabaseURL.parse(url), max_size=2)
    table, key = db.url.table, chunking_key({"bench": True})
    names = create_tables(db, handed, {"m": 16, "ef_construction": 64, "ef_search": 100})
    by_file: dict[str, list[int]] = {}
    for j, c in enumerate(chunks):
        by_file.setdefault(c.source_path, []).append(j)
    for f, rows in by_file.items():
        staged = [staged_row("synthetic", key, f, i, chunks[j], vecs[j]) for i, j in enumerate(rows)]
        db.run(lambda conn: copy_rows(conn, names["staging"], ["file_sha256", "chunking"] + CHUNK_COLUMNS,
                                      ["text", "text"] + COPY_TYPES, staged), what="stage")
        db.run(lambda conn: publish_file(conn, table, f, "synthetic", key, len(rows), 1,
                                         "2026-01-01T00:00:00+00:00"), what="publish")
    db.run(lambda c: postings.refresh(c, table), what="count the lexicon")
    with db.connection() as conn:
        conn.autocommit = True
        postings.vacuum(conn, table)
    db.close()
    return PgVectorKnowledgeBase.connect(url, handed)


class BruteForce:
    """The filtered top k by scoring every kept chunk (rules in the module docstring)."""

    def __init__(self, chunks: list[Chunk], vecs: np.ndarray, lexical: LexicalIndex):
        self.chunks, self.vecs, self.lexical = chunks, vecs, lexical
        self.files = np.array([c.source_path for c in chunks])

    def top(self, query: str, vector: np.ndarray, kept_files: frozenset[str], k: int, mode: str) -> list[str]:
        kept = np.flatnonzero(np.isin(self.files, list(kept_files)))
        cos = self.vecs[kept] @ vector
        depth = min(len(kept), k if mode == "dense" else max(k, HYBRID.depth))
        dense = [int(kept[i]) for i in np.argsort(-cos, kind="stable")[:depth]]
        if mode == "dense":
            order = dense
        else:
            vocab = self.lexical._bm25.vocab_dict
            wanted = [t for t in dict.fromkeys(tokens(query)) if t in vocab]
            bm = np.asarray(self.lexical._bm25.get_scores(wanted))[:len(self.chunks)] if wanted else np.zeros(1)
            hits = [int(i) for i in kept if wanted and bm[i] > 0]
            lexical = sorted(hits, key=lambda i: (-bm[i], i))[:depth]
            order = [i for i, _ in rrf([dense, lexical], [HYBRID.dense, HYBRID.lexical], HYBRID.k)]
        return [self.chunks[i].chunk_id for i in order[:k]]


def measure(kb, handed, truth: BruteForce | None, questions, vectors, flt, k: int, mode: str) -> dict:
    """Search every question through ``kb`` with ``flt`` (None: unfiltered): ms and recall."""
    selecting = []
    for _ in range(5 if flt is not None else 0):  # what each question pays first: the filter against the files
        t0 = time.perf_counter()
        kb.select(replace(flt))  # a new filter each time, as each request parses its own
        selecting.append((time.perf_counter() - t0) * 1e3)
    within = kb.select(flt) if flt is not None else None
    for q in questions[:3]:  # warm up: the selector, the prepared statement
        kb.search(q, k, mode, within=within)
    ms, hits = [], []
    for q in questions:
        t0 = time.perf_counter()
        found = [p.id for p in kb.search(q, k, mode, within=within)]
        ms.append((time.perf_counter() - t0) * 1e3)
        if truth is not None and within is not None:
            expected = truth.top(q, vectors[q], within.files, k, mode)
            hits.append(len(set(found) & set(expected)) / max(1, len(expected)))
    return {"ms median": round(float(np.median(ms)), 2), "ms p95": round(float(np.percentile(ms, 95)), 2),
            "select ms": round(float(np.median(selecting)), 2) if selecting else None,
            "recall": round(float(np.mean(hits)), 4) if hits else None}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.bench_filters", description=__doc__.split("\n")[0])
    p.add_argument("--chunks", type=int, default=100_000)
    p.add_argument("--files", type=int, default=1000)
    p.add_argument("--shares", default="0.01,0.1,0.5", help="shares of the chunks the filters keep")
    p.add_argument("--queries", type=int, default=100)
    p.add_argument("--k", type=int, default=5)
    p.add_argument("--embed-max", type=int, default=3000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backends", default="faiss,pgvector")
    add_database_option(p)
    p.add_argument("--out", default="reports/filters")
    return p.parse_args(argv)


def main(argv=None) -> int:
    from eval_sets.popqa import load_questions

    args = parse_args(argv)
    embedder = get_embedder()
    base = synthetic_chunks(min(args.chunks, args.embed_max), args.seed)
    real, _ = embedded_vectors(base, embedder, args.seed)
    vecs = corpus_vectors(real, args.chunks, args.seed)
    chunks = with_files(synthetic_chunks(args.chunks, args.seed), args.files)
    questions = [q["question"] for q in load_questions(limit=args.queries, seed=args.seed, split=None)]
    handed = HandedEmbedder(embedder)
    handed.vectors = {q: v for q, v in zip(questions, embedder.encode(questions))}
    files = sorted({c.source_path for c in chunks})
    rng = random.Random(args.seed)
    shares = [float(s) for s in args.shares.split(",")]
    filters = {s: DocumentFilter(paths=(tuple(rng.sample(files, max(1, round(s * len(files))))),)) for s in shares}
    rows = []
    t0 = time.perf_counter()
    kb = faiss_kb(chunks, vecs, handed, args.files)
    print(f"faiss knowledge base: {time.perf_counter() - t0:.1f} s", flush=True)
    truth = BruteForce(chunks, vecs, kb.lexical)
    with database(args.pg_url) as url:
        backends = {"faiss": kb}
        if "pgvector" in args.backends:
            t0 = time.perf_counter()
            backends["pgvector"] = pg_kb(with_table(url, f"bench_filters_{args.chunks}_seed{args.seed}"), chunks,
                                         vecs, handed)
            print(f"pgvector knowledge base: {time.perf_counter() - t0:.1f} s", flush=True)
        for name, store in backends.items():
            if name not in args.backends:
                continue
            for mode in ("dense", "hybrid"):
                for share, flt in [(None, None), *filters.items()]:
                    row = {"backend": name, "mode": mode, "kept": "all" if share is None else f"{share:.0%}",
                           **measure(store, handed, truth, questions, handed.vectors, flt, args.k, mode)}
                    rows.append(row)
                    print(json.dumps(row), flush=True)
        if "pgvector" in backends:
            backends["pgvector"].close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps({"args": vars(args), "machine": machine(), "rows": rows}, indent=2))
    lines = ["| backend | mode | chunks kept | search ms median | ms p95 | filter resolved, ms | "
             "recall@%d vs brute force |" % args.k, "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['backend']} | {r['mode']} | {r['kept']} | {r['ms median']} | {r['ms p95']} | "
              f"{'—' if r['select ms'] is None else r['select ms']} | "
              f"{'—' if r['recall'] is None else r['recall']} |" for r in rows]
    (out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
