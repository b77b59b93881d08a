"""Retrieval benchmark: knowledge-base build throughput, query latency, HNSW recall, and hybrid
search in both backends.

Usage::

    python -m experiments.bench_retrieval [--sizes 10000,100000] [--types flat,hnsw,pgvector] [--queries 200]
        [--k 10] [--embed-max 3000] [--seed 0] [--m 32] [--ef-construction 40] [--ef-search 64]
        [--pg-m 16] [--pg-ef-construction 64] [--pg-ef-search 100] [--pg-url postgresql://...]
        [--threads N] [--out results/bench-retrieval]

``--types`` takes any of ``flat, hnsw, pgvector, hybrid, hnsw-hybrid, pg-hybrid``.

Corpus: ``N`` synthetic chunks recombined from the PopQA knowledge base
(``eval_sets/popqa/knowledge_base.jsonl``, chunked as the program chunks it): chunk j takes a run
of sentences from one real chunk and splices in a sentence of another, up to that chunk's
length (about 95 words). The sequence is fixed by ``--seed`` and prefix-stable (the 10k corpus
is the first 10k chunks of the 100k one). Its id is ``syn-<j>#0``, j in 7 digits.

Vectors: the first ``min(N, --embed-max)`` chunks are embedded for real with the packaged
all-MiniLM-L6-v2 embedder (timed: that gives the embedding throughput). Embedding is about
10 chunks/s per core for chunks of this length, so 100k real embeddings would take hours; the
rest of the vectors are synthesised from the real ones (a random mix of two, plus Gaussian
noise, renormalised). Pass ``--embed-max`` at least the largest size to embed everything.
Both are cached under ``.cache/bench-retrieval/`` (``.npy``), so flat and HNSW (and reruns)
reuse them. Past ``--embed-max`` a chunk's vector is not its text's: the lexical index reads
the text, the dense index the vector, so there the two rankings of a hybrid search agree less
than on a real corpus (their costs are what this measures).

Index types: faiss ``flat`` and ``hnsw`` (inner product), and ``pgvector``: the PostgreSQL
knowledge base (:mod:`program.retrieval.postgres`) with its HNSW index (cosine; ``--pg-m``,
``--pg-ef-construction``, ``--pg-ef-search``), on the server of ``--pg-url`` or a throwaway
``pgserver`` one. Its vectors are written through the program's ingestion path (batches of 256
chunks copied into the staging table, then one transaction publishing them into the indexed
table), and its queries go through the connection pool, so its latency includes a round
trip to the server over a Unix socket or TCP.

Hybrid types, the program's default search (dense and BM25 rankings, ``depth`` 50 each, fused by
reciprocal rank with ``program.retrieval.fusion.HYBRID``), each searched through the knowledge
base's own ``search(q, k, mode="hybrid")`` and ``mode="dense"``:

* ``hybrid``: the faiss :class:`~program.retrieval.index.KnowledgeBase` over a flat index and
  the ``bm25s`` index of the chunks (``LexicalIndex.build`` over their embedded text, as
  ``KnowledgeBase.build`` makes it); ``hnsw-hybrid``: the same over the HNSW index of ``--m``,
  ``--ef-construction``, ``--ef-search``;
* ``pg-hybrid``: the pgvector knowledge base in table ``bench_<N>_seed<S>_hybrid``, built as
  the program's index run builds it: the BM25 postings written while publishing, then the
  lexicon counted; searched by the one fused SQL statement
  (:mod:`program.retrieval.postgres.hybrid`).

The knowledge base's embedder is a stand-in that hands back the vector the benchmark has just
embedded for the query, so ``search`` runs whole while the embedding is timed apart.

Measured per size and index type:

* ``embed/s``: chunks embedded per second (on the real part); ``add/s``: vectors added to the
  index per second (all N; for pgvector: staged, published and indexed; for the hybrid types
  with the lexical index built too); ``build/s``: N / (N / embed rate + add seconds), the
  knowledge base build throughput (estimated from the embedding rate when not all N were embedded);
* latency per query, one query at a time, median and 90th percentile in ms, with the query's
  embedding (``encode([q])`` + search) and without (search only), over ``--queries`` PopQA
  questions (after 3 warm-up queries); for the hybrid types, of hybrid search;
* ``recall@k`` of each index against exact flat search on the same vectors (1.0 for flat);
  none for the hybrid types, whose results are meant to differ from dense search.

When a hybrid type runs, the table gets five more columns (and its JSON rows the same keys;
the other types' rows have none of them and show "—"):

* ``lexical s``: seconds of the lexical side of the build, within ``add/s``: the BM25 index
  (faiss), the lexicon count (pgvector; its postings are written while publishing, as they are
  for the ``pgvector`` row, whose index run writes them too);
* ``dense ms median``, ``dense ms p90``: the same knowledge base's ``mode="dense"`` search,
  search only, on the same questions, beside the hybrid figures;
* ``top-5 same``, ``top-5 overlap`` (on the faiss hybrid rows, when ``pg-hybrid`` ran at the same
  size): the share of questions whose top 5 chunk ids are the same set in this row's hybrid
  search and pg-hybrid's, and the mean share of the 5 they have in common.

Output: a Markdown table on stdout, and ``<out>/<YYYY-MM-DD>-<HHMMSS>.json`` with the settings,
the machine and one row per (size, type) (with hybrid types also ``fusion`` and ``bm25``, their
parameters).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import time
from datetime import datetime
from pathlib import Path

import faiss
import numpy as np

from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions
from experiments.pg_local import add_database_option, database
from program.retrieval.chunking import Chunk, chunk_document, split_sentences
from program.retrieval.corpus import load_documents
from program.retrieval.embedding import Embedder
from program.retrieval.faiss_index import IndexSpec, build_index
from program.retrieval.fusion import HYBRID
from program.retrieval.index import KnowledgeBase, embed_text
from program.retrieval.lexical import PARAMS as LEXICAL_PARAMS, LexicalIndex

CACHE_DIR = Path(".cache/bench-retrieval")
COLUMNS = ["chunks", "index", "embed/s", "add/s", "build/s", "ms median", "ms p90",
           "ms median (+embed)", "ms p90 (+embed)", "recall@k"]
#: hybrid search (dense and BM25 fused by reciprocal rank): the faiss knowledge base over a flat
#: or HNSW index, the pgvector one with its BM25 postings
HYBRID_TYPES = ("hybrid", "hnsw-hybrid", "pg-hybrid")
TYPES = ("flat", "hnsw", "pgvector") + HYBRID_TYPES
PG_TYPES = ("pgvector", "pg-hybrid")
AGREE_K = 5  # the top-k whose agreement between the faiss and the pgvector hybrid is reported
HYBRID_COLUMNS = ["lexical s", "dense ms median", "dense ms p90", "top-5 same", "top-5 overlap"]


def synthetic_chunks(n: int, seed: int = 0) -> list[Chunk]:
    """``n`` chunks recombined from the PopQA knowledge base (rule in the module docstring).

    Returns:
        A list of ``n`` :class:`Chunk` with ids ``syn-<j>#0``, ``j`` written with 7 digits so that
        ids sort as positions do (both backends break ranking ties by that order); the same
        ``seed`` gives the same list, and the list for ``n`` is a prefix of the list for any larger ``n``.
    """
    base = [c for d in load_documents(KNOWLEDGE_BASE_PATH) for c in chunk_document(d)]
    sentences = [split_sentences(c.text) for c in base]
    rng = random.Random(seed)
    out = []
    for j in range(n):
        b = rng.randrange(len(base))
        own, other = sentences[b], sentences[rng.randrange(len(base))]
        start = rng.randrange(len(own))
        picked = own[start:] + own[:start]
        picked.insert(rng.randrange(len(picked) + 1), rng.choice(other))
        text, words = [], 0
        target = len(base[b].text.split())
        for s in picked:
            if words >= target:
                break
            text.append(s)
            words += len(s.split())
        out.append(Chunk(f"syn-{j:07d}#0", f"syn-{j:07d}", " ".join(text), title=base[b].title))
    return out


def embedded_vectors(chunks: list[Chunk], embedder: Embedder, seed: int) -> tuple[np.ndarray, float]:
    """Real embeddings of ``chunks`` and the seconds they took, cached by (seed, count).

    Returns:
        ``(vectors, seconds)``: float32 array of shape ``(len(chunks), 384)``, and the wall time of
        the original embedding run (read back from the cache's sidecar JSON on reuse).
    """
    stem = CACHE_DIR / f"embedded-seed{seed}-{len(chunks)}"
    if stem.with_suffix(".npy").is_file():
        meta = json.loads(stem.with_suffix(".json").read_text())
        return np.load(stem.with_suffix(".npy")), float(meta["seconds"])
    embedder.encode(["warm up"])
    t0 = time.perf_counter()
    vecs = embedder.encode([embed_text(c) for c in chunks])
    seconds = time.perf_counter() - t0
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(stem.with_suffix(".npy"), vecs)
    stem.with_suffix(".json").write_text(json.dumps({"seconds": seconds, "chunks": len(chunks)}))
    return vecs, seconds


def corpus_vectors(real: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` unit vectors: the ``real`` ones first, then mixes ``a*u + (1-a)*v + noise`` of two random
    real vectors (a in [0.6, 0.9], noise of norm about 0.3), renormalised; cached as ``.npy``.

    Returns:
        float32 array of shape ``(n, real.shape[1])``.
    """
    path = CACHE_DIR / f"vectors-{n}-seed{seed}-real{len(real)}.npy"
    if path.is_file():
        return np.load(path)
    rng = np.random.default_rng(seed)
    extra = n - len(real)
    u, v = real[rng.integers(0, len(real), extra)], real[rng.integers(0, len(real), extra)]
    a = rng.uniform(0.6, 0.9, (extra, 1)).astype(np.float32)
    mixed = a * u + (1 - a) * v + rng.normal(0, 0.3 / np.sqrt(real.shape[1]), u.shape).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    vecs = np.ascontiguousarray(np.vstack([real, mixed]), dtype=np.float32)
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    np.save(path, vecs)
    return vecs


def time_queries(index, embedder: Embedder, questions: list[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run ``questions`` one at a time against ``index``.

    Returns:
        ``(with_embed_ms, search_ms, ids)``: per-query milliseconds including and excluding the
        query embedding (shape ``(q,)``), and the top-``k`` ids (shape ``(q, k)``).
    """
    for q in questions[:3]:
        index.search(embedder.encode([q]), k)
    total, search, ids = [], [], []
    for q in questions:
        t0 = time.perf_counter()
        vec = embedder.encode([q])
        t1 = time.perf_counter()
        _, row = index.search(vec, k)
        t2 = time.perf_counter()
        total.append((t2 - t0) * 1e3)
        search.append((t2 - t1) * 1e3)
        ids.append(row[0])
    return np.array(total), np.array(search), np.array(ids)


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    """Mean over rows of |found_i ∩ truth_i| / k, both arrays of shape ``(q, k)``."""
    return float(np.mean([len(set(f) & set(t)) / truth.shape[1] for f, t in zip(found, truth)]))


class HandedEmbedder:
    """The embedder a hybrid type's knowledge base searches with: it hands back the vector the
    benchmark embedded for that query just before (``vectors[query]``), so ``search`` runs the
    program's whole path (embed, dense, lexical, fuse) while its time excludes the embedding,
    which is timed on its own as for the other types."""

    def __init__(self, embedder: Embedder):
        self.name, self.dimensions, self.vectors = embedder.name, embedder.dimensions, {}

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.ascontiguousarray(np.stack([self.vectors[t] for t in texts]), dtype=np.float32)


def position(chunk_id: str) -> int:
    """The ``j`` of a synthetic chunk id ``syn-<j>#0``."""
    return int(chunk_id[4:].split("#")[0])


def time_searches(kb, handed: HandedEmbedder, embedder: Embedder, questions: list[str], k: int,
                  mode: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Run ``questions`` one at a time through ``kb.search(q, k, mode=mode)``, the knowledge
    base's own search (``kb`` holds ``handed`` as its embedder).

    Returns:
        As :func:`time_queries`: milliseconds with and without the query embedding, shape ``(q,)``,
        and the top-``k`` chunk positions, shape ``(q, k)`` (-1 where fewer came back).
    """
    for q in questions[:3]:
        handed.vectors[q] = embedder.encode([q])[0]
        kb.search(q, k, mode=mode)
    total, search, ids = [], [], []
    for q in questions:
        t0 = time.perf_counter()
        vec = embedder.encode([q])
        t1 = time.perf_counter()
        handed.vectors[q] = vec[0]
        passages = kb.search(q, k, mode=mode)
        t2 = time.perf_counter()
        total.append((t2 - t0) * 1e3)
        search.append((t2 - t1) * 1e3)
        ids.append([position(p.id) for p in passages] + [-1] * (k - len(passages)))
    return np.array(total), np.array(search), np.array(ids)


def agreement(a: np.ndarray, b: np.ndarray, k: int = AGREE_K) -> tuple[float, float]:
    """How alike two runs' top-``k`` are, rows ``(q, >= k)`` of ids, best first.

    Returns:
        ``(same, overlap)``: the share of rows whose first ``k`` ids are the same set, and the
        mean over rows of |a_i ∩ b_i| / k (both 1.0 for identical results).
    """
    pairs = [(set(x[:k]), set(y[:k])) for x, y in zip(a, b)]
    return (float(np.mean([x == y for x, y in pairs])), float(np.mean([len(x & y) / k for x, y in pairs])))


def build_hybrid(kind: str, chunks: list[Chunk], vecs: np.ndarray, spec: IndexSpec, handed: HandedEmbedder,
                 args) -> tuple[object, float, float]:
    """The knowledge base of hybrid type ``kind`` over ``chunks`` and their ``vecs``, as the program builds it.

    ``hybrid``, ``hnsw-hybrid``: the faiss index (flat, or HNSW of ``spec``) and the BM25 index of
    the chunks' embedded text (``LexicalIndex.build``, as ``KnowledgeBase.build`` makes it), in a
    :class:`KnowledgeBase`. ``pg-hybrid``: the pgvector table with its BM25 postings and
    lexicon, written by :func:`experiments.bench_pgvector.build_pgvector`.

    Returns:
        ``(knowledge base, add seconds, lexical seconds)``: add seconds count everything but the
        embedding (faiss: vectors and BM25; pgvector: staging, publishing, lexicon); lexical
        seconds, the lexical part where it is separate (faiss: the BM25 index; pgvector: the
        lexicon count, the postings being written while publishing).
    """
    if kind == "pg-hybrid":
        from experiments.bench_pgvector import build_pgvector
        from experiments.pg_local import with_table

        index, add_s = build_pgvector(with_table(args.pg_base, f"bench_{len(chunks)}_seed{args.seed}_hybrid"),
                                      chunks, vecs, handed, args.pg_hnsw)
        return index.kb, add_s, index.lexicon_seconds
    faiss_spec = spec if kind == "hnsw-hybrid" else IndexSpec("flat")
    t0 = time.perf_counter()
    index = build_index(faiss_spec, vecs)
    t1 = time.perf_counter()
    lexical = LexicalIndex.build([embed_text(c) for c in chunks])
    t2 = time.perf_counter()
    manifest = {"index": faiss_spec.to_manifest(), "lexical": {"library": "bm25s", **LEXICAL_PARAMS}}
    return KnowledgeBase(index, chunks, manifest, CACHE_DIR, handed, lexical=lexical), t2 - t0, t2 - t1


def bench_hybrid(kind: str, n: int, vecs: np.ndarray, spec: IndexSpec, embedder: Embedder, questions: list[str],
                 args) -> tuple[float, np.ndarray, np.ndarray, np.ndarray, dict]:
    """Build hybrid type ``kind`` at size ``n`` and time its search, hybrid and dense.

    Returns:
        ``(add seconds, hybrid ms with embedding, hybrid ms, hybrid top-k positions, extra)``;
        extra: the row's ``HYBRID_COLUMNS`` (agreement left None, filled by :func:`add_agreement`).
    """
    handed = HandedEmbedder(embedder)
    kb, add_s, lexical_s = build_hybrid(kind, synthetic_chunks(n, args.seed), vecs, spec, handed, args)
    try:
        total, search, ids = time_searches(kb, handed, embedder, questions, args.k, "hybrid")
        dense = time_searches(kb, handed, embedder, questions, args.k, "dense")[1]
    finally:
        if kind == "pg-hybrid":
            kb.close()
    extra = {"lexical s": round(lexical_s, 3), "dense ms median": round(float(np.median(dense)), 3),
             "dense ms p90": round(float(np.percentile(dense, 90)), 3), "top-5 same": None, "top-5 overlap": None}
    return add_s, total, search, ids, extra


def bench_dense(kind: str, n: int, vecs: np.ndarray, spec: IndexSpec, embedder: Embedder, questions: list[str],
                args) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Build type ``kind`` (flat, hnsw, pgvector) at size ``n`` and time its search.

    Returns:
        ``(add seconds, ms with embedding, ms, top-k ids)``, as :func:`time_queries` gives them.
    """
    if kind == "pgvector":
        from experiments.bench_pgvector import build_pgvector
        from experiments.pg_local import with_table

        index, add_s = build_pgvector(with_table(args.pg_base, f"bench_{n}_seed{args.seed}"),
                                      synthetic_chunks(n, args.seed), vecs, embedder, args.pg_hnsw)
    else:
        t0 = time.perf_counter()
        index = build_index(IndexSpec(kind, spec.m, spec.ef_construction, spec.ef_search), vecs)
        add_s = time.perf_counter() - t0
    total, search, ids = time_queries(index, embedder, questions, args.k)
    if kind == "pgvector":
        index.close()
    return add_s, total, search, ids


def add_agreement(rows: list[dict], found: dict[str, np.ndarray]) -> None:
    """Fill ``top-5 same`` and ``top-5 overlap`` of each faiss hybrid row of ``rows`` (one size)
    from its hybrid top-k and pg-hybrid's (``found``: type -> positions), when both ran."""
    if "pg-hybrid" not in found:
        return
    for r in rows:
        if r["index"] in ("hybrid", "hnsw-hybrid"):
            same, overlap = agreement(found[r["index"]], found["pg-hybrid"])
            r.update({"top-5 same": round(same, 4), "top-5 overlap": round(overlap, 4), "agreement_with": "pg-hybrid"})


def bench_size(n: int, types: list[str], spec: IndexSpec, embedder: Embedder, questions: list[str],
               args) -> list[dict]:
    """All measurements for one corpus size: one row per index type (keys: ``COLUMNS`` and more;
    the hybrid types also ``HYBRID_COLUMNS``)."""
    chunks = synthetic_chunks(min(n, args.embed_max), args.seed)
    real, embed_s = embedded_vectors(chunks, embedder, args.seed)
    vecs = corpus_vectors(real, n, args.seed)
    embed_rate = len(real) / embed_s
    truth = None
    rows, found = [], {}
    for kind in types:
        if kind in HYBRID_TYPES:  # no recall: hybrid search is meant to differ from exact dense search
            add_s, total, search, found[kind], extra = bench_hybrid(kind, n, vecs, spec, embedder, questions, args)
            hits = None
        else:
            add_s, total, search, ids = bench_dense(kind, n, vecs, spec, embedder, questions, args)
            if truth is None:
                truth = build_index(IndexSpec("flat"), vecs).search(embedder.encode(questions), args.k)[1]
            extra, hits = {}, round(recall(ids, truth), 4)
        rows.append({"chunks": n, "index": kind, "embedded_chunks": len(real), "embed_seconds": round(embed_s, 2),
                     "add_seconds": round(add_s, 3), "embed/s": round(embed_rate, 1),
                     "add/s": round(n / add_s), "build/s": round(n / (n / embed_rate + add_s), 1),
                     "ms median": round(float(np.median(search)), 3),
                     "ms p90": round(float(np.percentile(search, 90)), 3),
                     "ms median (+embed)": round(float(np.median(total)), 2),
                     "ms p90 (+embed)": round(float(np.percentile(total, 90)), 2),
                     "recall@k": hits, **extra})
        dense = f", dense {extra['dense ms median']} ms" if extra else ""
        print(f"  {n} {kind}: add {add_s:.1f}s, search median {rows[-1]['ms median']} ms{dense}", flush=True)
    add_agreement(rows, found)
    return rows


def markdown(rows: list[dict], k: int) -> str:
    """The rows as a Markdown table (columns ``COLUMNS``, then ``HYBRID_COLUMNS`` when a hybrid
    type ran; ``recall@k`` named with the actual k; "—" where a row has no value)."""
    columns = COLUMNS + (HYBRID_COLUMNS if any(r["index"] in HYBRID_TYPES for r in rows) else [])
    head = [c.replace("@k", f"@{k}") for c in columns]

    def cell(value) -> str:
        return "—" if value is None else f"{value:,}" if isinstance(value, int) else str(value)

    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> dict:
    """CPU count and model, Python, faiss and torch versions, thread settings."""
    import torch
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").is_file() else ""
    return {"cpus": os.cpu_count(), "cpu": cpu, "python": platform.python_version(), "faiss": faiss.__version__,
            "torch": torch.__version__, "faiss_threads": faiss.omp_get_max_threads()}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.bench_retrieval", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10000,100000", help="comma-separated corpus sizes (chunks)")
    p.add_argument("--types", default="flat,hnsw,pgvector",
                   help=f"comma-separated index types: {', '.join(TYPES)}")
    p.add_argument("--queries", type=int, default=200, help="PopQA questions timed per (size, type)")
    p.add_argument("--k", type=int, default=10, help="results per query (and the k of recall@k)")
    p.add_argument("--embed-max", type=int, default=3000, help="chunks embedded for real; the rest synthesised")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--m", type=int, default=32, help="HNSW neighbours per node")
    p.add_argument("--ef-construction", type=int, default=40)
    p.add_argument("--ef-search", type=int, default=64)
    p.add_argument("--pg-m", type=int, default=16, help="pgvector HNSW m")
    p.add_argument("--pg-ef-construction", type=int, default=64, help="pgvector HNSW ef_construction")
    p.add_argument("--pg-ef-search", type=int, default=100, help="pgvector hnsw.ef_search")
    add_database_option(p, "where tables bench_<N>_seed<S> (pgvector) and bench_<N>_seed<S>_hybrid "
                           "(pg-hybrid) must not exist")
    p.add_argument("--threads", type=int, default=None, help="torch threads of the embedder (default: its own)")
    p.add_argument("--out", default="results/bench-retrieval", help="folder of the JSON result")
    args = p.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
        args.types = [index_type(t.strip()) for t in args.types.split(",") if t.strip()]
        args.pg_hnsw = {"m": args.pg_m, "ef_construction": args.pg_ef_construction, "ef_search": args.pg_ef_search}
        args.spec = IndexSpec("hnsw", args.m, args.ef_construction, args.ef_search)
    except ValueError as exc:
        p.error(str(exc))
    if not args.sizes or min(args.sizes) < args.k or args.queries < 1 or args.embed_max < 2:
        p.error("need sizes >= k, --queries >= 1 and --embed-max >= 2")
    if args.k < AGREE_K and set(args.types) & set(HYBRID_TYPES):
        p.error(f"the hybrid types need --k >= {AGREE_K} (their top-{AGREE_K} agreement)")
    return args


def index_type(name: str) -> str:
    """``name`` itself when it is one of ``TYPES``. Raises ValueError naming them otherwise."""
    if name not in TYPES:
        raise ValueError(f"index type must be one of {', '.join(TYPES)}, got {name!r}")
    return name


def main(argv=None) -> int:
    args = parse_args(argv)
    embedder = Embedder(threads=args.threads)
    questions = [q["question"] for q in load_questions(limit=args.queries, seed=args.seed, split=None)]
    started = datetime.now()
    rows = []
    with (database(args.pg_url) if set(PG_TYPES) & set(args.types) else contextlib.nullcontext()) as args.pg_base:
        for n in args.sizes:
            rows += bench_size(n, args.types, args.spec, embedder, questions, args)
    table = markdown(rows, args.k)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{started:%Y-%m-%d-%H%M%S}.json"
    settings = {k: v for k, v in vars(args).items() if k not in ("spec", "pg_base")}
    hybrid = {"fusion": HYBRID.to_manifest(), "bm25": LEXICAL_PARAMS} if set(HYBRID_TYPES) & set(args.types) else {}
    path.write_text(json.dumps({"settings": settings, "hnsw": args.spec.to_manifest(), "pgvector": args.pg_hnsw,
                                **hybrid, "machine": machine(),
                                "embedder_threads": embedder.threads, "started": started.isoformat(timespec="seconds"),
                                "rows": rows, "table": table}, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
