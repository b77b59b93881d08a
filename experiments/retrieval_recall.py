"""Retrieval recall per domain and category: dense, lexical (BM25), hybrid, and hybrid + rewrite.

Usage::

    python -m experiments.retrieval_recall [--pgvector] [--rewrites reports/retrieval-recall/rewrites.jsonl]
        [--rewrite-with-lm] [--popqa-train 200] [--out reports/retrieval-recall]

No LM runs unless ``--rewrite-with-lm``. Rows: the labeled domains' queries (help centre,
Kubernetes, handbook; ``eval_sets.domains.load_rows(name, "queries", split)``, those with
``relevant_chunk_ids``) of every split, and PopQA's train (the first ``--popqa-train``) and dev
questions, a chunk relevant when it names the subject and states an answer
(``optimize.training.pairs``). Each knowledge base is the program's own faiss index of the domain
(reused from the cache; its BM25 index is added on first use).

1. For every row, the dense and the lexical ranking of its question (top 100 each), and the
   lexical ranking with feedback terms of the dense ranking's first chunks.
2. The fusion's rank constant, lexical weight and depth are chosen on the train and dev rows
   only (``experiments.recall_metrics.choose_fusion``: best mean over domains of hybrid recall@5).
3. recall@1/3/5/10 and MRR per domain, split and category, for dense, lexical, hybrid under
   the chosen fusion, and hybrid+feedback (the same with :data:`FEEDBACK_TERMS` feedback terms,
   ``program.retrieval.feedback``); test rows are reported, never used to choose.
4. hybrid + rewrite, for rows with a cached rewrite (``--rewrites``: JSONL of ``domain``,
   ``id``, ``query``): the question's hybrid ranking fused with the rewrite's, as the
   correction fuses them (``program.stages.crag``). ``--rewrite-with-lm`` writes the missing
   rewrites first with the compiled program's rewrite (embedded model, temperature 0), for the
   rows of ``--rewrite-splits`` and ``--rewrite-category``; a group whose rows are not all
   rewritten shows "-" in that column.
5. ``--pgvector``: each knowledge base also indexed in a throwaway PostgreSQL (the faiss
   index's stored vectors, nothing embedded again), and the share of dev rows whose hybrid top 5
   is the faiss hybrid top 5 (as a set, and in order).

Writes ``<out>/summary.json`` and ``<out>/README.md`` (the tables) and prints the tables.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from pathlib import Path

from experiments import recall_metrics as rm
from program.retrieval.feedback import FEEDBACK_CHUNKS
from program.retrieval.fusion import FusionParams, rrf

DOMAIN_NAMES = ("adversarial", "kubernetes", "handbook")
DEPTH = 100
CRAG_K = 3  # passages the program reads per search (load_compiled's k)
FEEDBACK_TERMS = 10  # RM3's customary number of expansion terms (Anserini's default)


def domain_rows(name: str) -> list[dict]:
    """The queries of domain ``name`` (all splits) with relevant chunk ids."""
    from eval_sets.domains import load_rows

    return [{"domain": name, "split": split, "id": r["id"], "question": r["question"],
             "category": r.get("category", "all"), "relevant": set(r["relevant_chunk_ids"])}
            for split in ("train", "dev", "test") for r in load_rows(name, "queries", split)
            if r.get("relevant_chunk_ids") and r.get("answerable", True)]


def popqa_rows(kb, train_limit: int) -> list[dict]:
    """PopQA train (first ``train_limit``) and dev questions with at least one relevant chunk of ``kb``."""
    from eval_sets.popqa import load_questions
    from optimize.training.pairs import names_subject, states_answer

    out = []
    for split, questions in (("train", load_questions(limit=train_limit, split="train")),
                             ("dev", load_questions(split="dev"))):
        for q in questions:
            relevant = {c.chunk_id for c in kb.chunks if names_subject(f"{c.title} {c.text}", q["subject"])
                        and states_answer(c.text, q["possible_answers"])}
            if relevant:
                out.append({"domain": "popqa", "split": split, "id": q["id"], "question": q["question"],
                            "category": q.get("relation", "all"), "relevant": relevant})
    return out


def add_rankings(rows: list[dict], kb, key) -> None:
    """Each row's ``rankings``: ``dense``, ``lexical`` and ``lexical+feedback<n>`` (n =
    :data:`FEEDBACK_TERMS`), top :data:`DEPTH` chunk ids as ``key`` maps them."""
    questions = [r["question"] for r in rows]
    for mode in ("dense", "lexical"):
        for r, found in zip(rows, kb.search_batch(questions, DEPTH, mode=mode)):
            r.setdefault("rankings", {})[mode] = [key(p.id) for p in found]
    position = {c.chunk_id: i for i, c in enumerate(kb.chunks)}
    tops = kb.search_batch(questions, FEEDBACK_CHUNKS, mode="dense")
    for r, top in zip(rows, tops):
        query = kb.lexical_query(r["question"], [position[p.id] for p in top], FEEDBACK_TERMS)
        r["rankings"][f"lexical+feedback{FEEDBACK_TERMS}"] = [key(kb.chunks[i].chunk_id)
                                                              for i, _ in kb.lexical.search_tokens(query, DEPTH)]


def add_rewrites(rows: list[dict], kb, key, rewrites: dict, fusion: FusionParams) -> None:
    """For the rows with a cached rewrite: ``hybrid+rewrite``, the question's hybrid ranking
    fused with the rewrite's (equal weights) from the top; ``hybrid+correction``, what CRAG's
    correction reads (``program.stages.crag``): the question's first :data:`CRAG_K`, then the
    first :data:`CRAG_K` of the two rankings' top ``2 * CRAG_K`` fused that are not among them,
    then the rest of the question's ranking."""
    had = [r for r in rows if (r["domain"], r["id"]) in rewrites]
    if not had:
        return
    queries = [rewrites[(r["domain"], r["id"])] for r in had]
    for r, found in zip(had, kb.search_batch(queries, DEPTH, fusion=fusion)):
        again, asked = [key(p.id) for p in found], r["rankings"]["hybrid"]
        r["rankings"]["hybrid+rewrite"] = [i for i, _ in rrf([asked, again])]
        seen = asked[:CRAG_K]  # as the correction reads them: the question's k, then k new ones
        new = [i for i, _ in rrf([asked[:2 * CRAG_K], again[:2 * CRAG_K]]) if i not in seen][:CRAG_K]
        r["rankings"]["hybrid+correction"] = seen + new + [i for i in asked[CRAG_K:] if i not in new]


def load_rewrites(path: Path | None) -> dict:
    """``(domain, id) -> rewritten query`` from a JSONL file; {} when there is none.

    Raises:
        SystemExit: a line that is not JSON with ``domain``, ``id`` and ``query`` (one line naming it)."""
    if not path or not path.is_file():
        return {}
    out = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip():
            try:
                row = json.loads(line)
                out[(row["domain"], row["id"])] = row["query"]
            except (ValueError, KeyError, TypeError):
                raise SystemExit(f"error: {path}:{n}: expected a JSON object with domain, id and query") from None
    return out


def write_rewrites_with_lm(rows: list[dict], kbs: dict, path: Path, cached: dict) -> dict:
    """Rewrite every row's question without a cached rewrite with the compiled program's
    rewrite (the embedded model unless ``CRAG_LM`` names another), appending to ``path``."""
    from program import load_compiled
    from program.lm import configure_lm

    configure_lm()
    crag = load_compiled()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        for r in rows:
            if (r["domain"], r["id"]) not in cached:
                kb = kbs[r["domain"]]
                query = crag.web_searcher.rewrite_query(r["question"], kb.candidate_terms(r["question"]))
                cached[(r["domain"], r["id"])] = query
                f.write(json.dumps({"domain": r["domain"], "id": r["id"], "query": query}) + "\n")
                f.flush()
    return cached


def pgvector_agreement(rows: list[dict], kbs: dict, fusions: list[FusionParams], pg_url: str | None) -> dict:
    """Per knowledge base and fusion (keyed ``feedback=<n>``), the share of its dev rows whose
    pgvector hybrid top 5 equals faiss's (``same_set``, ``same_order``), both searched with it."""
    from experiments.pg_local import database, with_table
    from experiments.recall_pgvector import StoredVectors
    from program.retrieval.postgres import PgVectorKnowledgeBase

    def share(pairs) -> float:
        return round(sum(pairs) / max(len(pairs), 1), 4)

    out = {}
    with database(pg_url) as base:
        for name, kb in kbs.items():
            questions = [r["question"] for r in rows if r["domain"] == name and r["split"] == "dev"]
            with PgVectorKnowledgeBase.build(kb.manifest["source_path"], with_table(base, f"recall_{name}"),
                                             StoredVectors(kb), with_vocabulary=False) as pg:
                for fusion in fusions:
                    theirs = [[p.id for p in ps] for ps in kb.search_batch(questions, 5, fusion=fusion)]
                    ours = [[p.id for p in ps] for ps in pg.search_batch(questions, 5, fusion=fusion)]
                    out.setdefault(name, {"rows": len(questions)})[f"feedback={fusion.feedback}"] = {
                        "same_set": share([set(a) == set(b) for a, b in zip(ours, theirs)]),
                        "same_order": share([a == b for a, b in zip(ours, theirs)])}
    return out


def markdown(groups: list[dict], modes: list[str], split: str) -> str:
    """One table: a line per (domain, category) of ``split``, recall@5 and MRR per mode, and rows."""
    head = ["domain", "category", "rows"] + [f"{m} {f}" for m in modes for f in ("r@1", "r@3", "r@5", "r@10", "MRR")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for g in (g for g in groups if g["split"] == split):
        cells = [g["domain"], g["category"], str(g["dense"]["rows"])]
        for m in modes:  # a mode measured on part of the group's rows (rewrites of some rows) shows "-"
            f = g[m] if g[m]["rows"] == g["dense"]["rows"] else {}
            cells += [str(f.get(k, "-")) for k in ("recall@1", "recall@3", "recall@5", "recall@10", "mrr")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def collect(args) -> tuple[list[dict], dict]:
    """Every row with its dense and lexical rankings, and the knowledge bases by domain."""
    from eval_sets.domains import domain
    from optimize.training.pairs import chunk_key
    from program.app import resources

    rows, kbs = [], {}
    for name in DOMAIN_NAMES:
        kbs[name] = resources.knowledge_base(domain(name).kb_dir)
        mine = domain_rows(name)
        add_rankings(mine, kbs[name], chunk_key)
        rows += mine
    kbs["popqa"] = resources.knowledge_base()
    mine = popqa_rows(kbs["popqa"], args.popqa_train)
    add_rankings(mine, kbs["popqa"], lambda i: i)
    return rows + mine, kbs


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m experiments.retrieval_recall", description=__doc__.split("\n")[0])
    p.add_argument("--pgvector", action="store_true", help="also measure pgvector's agreement with faiss (dev rows)")
    p.add_argument("--pg-url", default=None, help="libpq URL of a server with pgvector (default: a throwaway one)")
    p.add_argument("--rewrites", type=Path, default=Path("reports/retrieval-recall/rewrites.jsonl"),
                   help="cached rewrites (JSONL: domain, id, query)")
    p.add_argument("--rewrite-with-lm", action="store_true", help="write the missing rewrites with the LM first")
    p.add_argument("--rewrite-category", default=None,
                   help="rewrite only rows of this category (e.g. vocabulary-mismatch); default every row")
    p.add_argument("--rewrite-splits", default="train,dev,test", help="rewrite only rows of these splits")
    p.add_argument("--popqa-train", type=int, default=200, help="PopQA train questions used to choose")
    p.add_argument("--out", type=Path, default=Path("reports/retrieval-recall"))
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    t0 = time.perf_counter()
    rows, kbs = collect(args)
    fusion, grid = rm.choose_fusion([r for r in rows if r["split"] != "test"])
    feedback = dataclasses.replace(fusion, feedback=FEEDBACK_TERMS)
    for r in rows:
        r["rankings"]["hybrid"] = rm.hybrid_ranking(r["rankings"]["dense"], r["rankings"]["lexical"], fusion)
        r["rankings"]["hybrid+feedback"] = rm.hybrid_ranking(r["rankings"]["dense"],
                                                             rm.lexical_ranking(r, feedback), feedback)
    rewrites = load_rewrites(args.rewrites)
    if args.rewrite_with_lm:
        wanted = [r for r in rows if r["split"] in args.rewrite_splits.split(",")
                  and args.rewrite_category in (None, r["category"])]
        rewrites = write_rewrites_with_lm(wanted, kbs, args.rewrites, rewrites)
    from optimize.training.pairs import chunk_key
    for name, kb in kbs.items():
        add_rewrites([r for r in rows if r["domain"] == name], kb, chunk_key if name != "popqa" else (lambda i: i),
                     rewrites, fusion)
    modes = ["dense", "lexical", "hybrid", "hybrid+feedback"] + (["hybrid+rewrite", "hybrid+correction"]
                                                                 if rewrites else [])
    groups = rm.grouped(rows, modes)
    agreement = pgvector_agreement(rows, kbs, [fusion, feedback], args.pg_url) if args.pgvector else None
    write_report(args, fusion, grid, groups, modes, agreement, time.perf_counter() - t0)
    return 0


def write_report(args, fusion, grid, groups, modes, agreement, seconds: float) -> None:
    """Print the tables and write ``summary.json`` and ``README.md`` into ``args.out``."""
    tables = {s: markdown(groups, modes, s) for s in ("train", "dev", "test")}
    text = [f"# Retrieval recall\n\n`python -m experiments.retrieval_recall{' --pgvector' if agreement else ''}` "
            f"({seconds:.0f} s, no LM). Fusion chosen on train and dev rows: {fusion.to_manifest()}.",
            "" if "hybrid+rewrite" in modes else "hybrid + rewrite: no cached rewrites; it needs an LM run "
            "(`--rewrite-with-lm`).", f"pgvector hybrid top 5 against faiss hybrid, dev rows: {agreement}"]
    text += [f"## {s}\n\n{tables[s]}" for s in ("test", "dev", "train")]
    print("\n\n".join(text))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "README.md").write_text("\n\n".join(text) + "\n", encoding="utf-8")
    (args.out / "summary.json").write_text(json.dumps(
        {"fusion": fusion.to_manifest(), "grid": grid, "modes": modes, "groups": groups,
         "pgvector_agreement": agreement, "seconds": round(seconds, 1)}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out / 'summary.json'}")


if __name__ == "__main__":
    raise SystemExit(main())
