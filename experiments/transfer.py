"""Leave one domain out: how the trained judges do on a knowledge base whose labels they never saw.

``python -m experiments.transfer [--domains adversarial,kubernetes,handbook,popqa] [--questions N]
[--out reports/judge-transfer]``

For each domain the judges are compiled twice from the repository's training rows
(``program.adaptation.fit.fit_judges``): with every source (*labels in*) and with every source but
that domain (*labels out*: its documents are still searched, its labels are neither trained nor
calibrated on, so its thresholds are the defaults a new knowledge base gets), and, for the labeled
domains, *adapted*: labels out plus the rows its own documents give with no labels
(``program.adaptation.synthetic_rows``: heading questions kept when retrieval ranks their source chunk first,
ARES-style; MiniCheck-style support rows), which also calibrate its thresholds. All are measured on
the same rows of that domain:

=====================  =====================================================================
``action_accuracy``    the evaluator's action (CRAG §4.3: best top-3 passage score against
                       ``lower`` / ``upper``) against ``expected_action``, on the test queries
                       that need retrieval (PopQA, which has no test split: dev questions,
                       ``correct`` when a top-3 passage is relevant, else ``incorrect``)
``passage_auc``        ROC AUC of the passage judge on each query's top-5 chunks, relevant when
                       in ``relevant_chunk_ids`` (PopQA: names the subject and states an answer)
``strip_f1``           F1 of the strips kept (score >= ``strip_keep``) on the strip rows
                       (CRAG §4.4), of the test split where the domain labels one, else dev
``support_accuracy``   three-way IsSup verdict accuracy (Self-RAG) on the support rows, same
                       split rule; PopQA: its dev claims kept right
=====================  =====================================================================

It runs the trained judges only (no LM, no end-to-end answers), so it fits in minutes on 2 cores.
Writes ``summary.json`` (one object per domain; each figure as ``{"labels_out", "adapted", "labels_in"}``,
no ``adapted`` for PopQA)
and prints a Markdown table. Exits 2 naming an unknown domain.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from optimize.training.pairs import (adversarial_passage_pairs, popqa_passage_pairs, popqa_strip_pairs,
                                     popqa_support_pairs)
from optimize.metrics import confusion
from program.lm.options import add_lm_options, lm_from
from program.stages.decision import evaluator_action
from program.adaptation.calibrate import auc, f1, group_runs, popqa_expected, question_best
from program.adaptation.fit import pair_scores
from program.adaptation.pairs import Pairs, adversarial_strip_pairs, support_rows_pairs
from program.atomic import write_atomic
from program.judgments import PASSAGE, STRIP, SUPPORT, owned_thresholds, strip, support

FIGURES = ("action_accuracy", "passage_auc", "strip_f1", "support_accuracy")
DEFAULT_OUT = Path("reports/judge-transfer")


def _top3_best(pairs: Pairs, scores) -> dict[str, float]:
    top3 = [i < 3 for g in group_runs(pairs.groups) for i in range(g)]
    return question_best([g for g, k in zip(pairs.groups, top3) if k], [s for s, k in zip(scores, top3) if k])


def _component_split(name: str, kind: str) -> str:
    from eval_sets.domains import load_rows

    return "test" if load_rows(name, kind, "test") else "dev"


def measure_domain(judges, name: str, kb, embedder) -> dict:
    """The four figures of ``judges`` on domain ``name`` (see the module docstring), with row counts."""
    from eval_sets.domains import load_rows

    queries = load_rows(name, "queries", "test")
    pairs = adversarial_passage_pairs([], queries, kb, embedder)
    scores = pair_scores(judges, PASSAGE, pairs)
    t = judges.thresholds_for(kb)
    expected = {r["id"]: r["expected_action"] for r in queries if r.get("needs_retrieval", True)}
    best = _top3_best(pairs, scores)
    actions = {q: evaluator_action(best.get(q, 0.0), t["lower"], t["upper"]) for q in expected}
    strip_split, support_split = _component_split(name, STRIP.rows), _component_split(name, SUPPORT.rows)
    strips = adversarial_strip_pairs(load_rows(name, "strips", strip_split), embedder)
    strip_scores = pair_scores(judges, STRIP, strips)
    support_rows = support_rows_pairs(load_rows(name, SUPPORT.rows, support_split), embedder)
    support_scores = pair_scores(judges, SUPPORT, support_rows)
    return {
        "action_accuracy": round(float(np.mean([actions[q] == a for q, a in expected.items()])), 4),
        "passage_auc": auc(pairs.labels, scores),
        "strip_f1": f1(strips.labels, strip.kept(judges, strip_scores)),
        "support_accuracy": support.accuracy(judges, support_rows.targets, support_scores),
        "confusion": confusion(expected, actions),
        "thresholds": {"lower": t["lower"], "upper": t["upper"], **owned_thresholds(judges)},
        "rows": {"queries": len(expected), "passages": len(pairs), "strips": len(strips), "support": len(support_rows)},
        "splits": {"queries": "test", "strips": strip_split, "support": support_split},
    }


def measure_popqa(judges, kb, embedder) -> dict:
    """The four figures on PopQA's dev questions (it has no test split)."""
    from eval_sets.popqa import load_questions

    dev_q = load_questions(split="dev")
    pairs = popqa_passage_pairs(dev_q, kb)
    scores = pair_scores(judges, PASSAGE, pairs)
    best = _top3_best(pairs, scores)
    _, expected, _ = popqa_expected(pairs.groups, pairs.labels, scores)
    t = judges.thresholds_for(kb)
    actions = {q: evaluator_action(best.get(q, 0.0), t["lower"], t["upper"]) for q in expected}
    strips = popqa_strip_pairs(dev_q, kb, embedder)
    strip_scores = pair_scores(judges, STRIP, strips)
    claims = popqa_support_pairs(dev_q, kb, embedder)
    claim_scores = pair_scores(judges, SUPPORT, claims)
    lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in claims.dense])
    kept = (lexical == 1.0) | support.kept(judges, claim_scores)
    return {
        "action_accuracy": round(float(np.mean([actions[q] == a for q, a in expected.items()])), 4),
        "passage_auc": auc(pairs.labels, scores),
        "strip_f1": f1(strips.labels, strip.kept(judges, strip_scores)),
        "support_accuracy": round(float((kept == np.asarray(claims.labels, bool)).mean()), 4),
        "confusion": confusion(expected, actions),
        "thresholds": {"lower": t["lower"], "upper": t["upper"], **owned_thresholds(judges)},
        "rows": {"queries": len(expected), "passages": len(pairs), "strips": len(strips), "support": len(claims)},
        "splits": {"queries": "dev", "strips": "dev", "support": "dev"},
    }


def run_transfer(domains: list[str], questions: int = 0, time_cap: float = 600.0, cross_encoder: bool = False,
                 cross_encoder_options: dict | None = None, log=print) -> dict:
    """Build every source's training pairs once, fit the judges with all and without each of
    ``domains`` (and adapted to its documents), and measure them on that domain. ``questions``: how
    many questions the configured LM writes per domain for its adaptation (0: headings only), within
    ``time_cap`` seconds per domain. ``cross_encoder``: also fine-tune the MiniLM cross-encoder as the
    passage judge on the adapted rows (``experiments.train_cross_encoder``; ``cross_encoder_options``:
    its ``max_pairs``, ``time_cap`` and ``epochs``) and report its action accuracy and passage AUC.
    Returns ``{domain: figures}``."""
    from eval_sets.domains import DOMAINS, load_rows
    from experiments.train_cross_encoder import cross_encoder_figures
    from optimize.training.sources import domain_source, popqa_source
    from program.adaptation.fit import fit_judges
    from program.adaptation.lm_questions import write_questions
    from program.adaptation.synthetic_rows import document_source
    from program.app import resources

    embedder = resources.embedder()
    kbs = {name: resources.knowledge_base(DOMAINS[name].kb_dir) for name in DOMAINS}
    kbs["popqa"] = resources.knowledge_base()
    sources = [popqa_source(kbs["popqa"], embedder, resources.web_backend("snapshot"), log=log)]
    for name in DOMAINS:
        log(f"{name}: training pairs")
        sources.append(domain_source(name, kbs[name], embedder))
    labels_in = fit_judges(sources, embedder, log=log)
    summary = {}
    for name in domains:
        without = [s for s in sources if s.name != name]
        variants = {"labels_out": without, "labels_in": sources}
        if name != "popqa":  # its documents' own rows, no labels (ARES): the adapted judges
            written = write_questions(kbs[name], questions, time_cap, log=log) if questions else None
            own_rows = document_source(f"{name} (documents)", kbs[name], embedder, written=written, log=log)
            variants["adapted"] = without + [own_rows]
        measure = (lambda j: measure_popqa(j, kbs["popqa"], embedder)) if name == "popqa" else \
                  (lambda j, n=name: measure_domain(j, n, kbs[n], embedder))
        figures = {v: measure(labels_in if v == "labels_in" else fit_judges(srcs, embedder, log=log))
                   for v, srcs in variants.items()}
        summary[name] = {f: {v: figures[v][f] for v in variants} for f in FIGURES}
        summary[name].update({"rows": figures["labels_out"]["rows"], "splits": figures["labels_out"]["splits"],
                              "confusion": {v: figures[v]["confusion"] for v in variants},
                              "thresholds": {v: figures[v]["thresholds"] for v in variants},
                              "trained_on": {v: [s.name for s in srcs] for v, srcs in variants.items()}})
        if cross_encoder and name != "popqa":
            strips = adversarial_strip_pairs(load_rows(name, "strips", _component_split(name, "strips")), embedder)
            summary[name]["cross_encoder_adapted"] = cross_encoder_figures(variants["adapted"], own_rows, name,
                                                                           kbs[name], embedder, strips=strips,
                                                                           log=log, **(cross_encoder_options or {}))
        log(f"{name}: " + "; ".join(f"{f} " + " / ".join(f"{v} {figures[v][f]}" for v in variants) for f in FIGURES))
    return summary


def format_table(summary: dict) -> str:
    """The summary as a Markdown table: one row per domain, each figure as labels out / adapted from
    its documents / labels in ("-" where a variant was not run)."""
    lines = ["| domain | action accuracy | passage AUC | strip F1 | support accuracy | test queries |",
             "|---|---|---|---|---|---|"]

    def cell(figure: dict) -> str:
        return " / ".join("-" if figure.get(v) is None else f"{figure[v]:.3f}"
                          for v in ("labels_out", "adapted", "labels_in"))

    for name, s in summary.items():
        cells = [cell(s[f]) for f in FIGURES]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {s['rows']['queries']} |")
    return "\n".join(lines)


def write_summary(summary: dict, out_dir: Path, meta: dict) -> Path:
    """``out_dir/summary.json``, written atomically (a kill leaves the previous one)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "summary.json"
    write_atomic(path, json.dumps({"meta": meta, **summary}, indent=2, sort_keys=False) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    from eval_sets.domains import DOMAINS

    parser = argparse.ArgumentParser(prog="python -m experiments.transfer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default=",".join([*DOMAINS, "popqa"]),
                        help="comma-separated domains to leave out one at a time (default: all and popqa)")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="folder for summary.json")
    parser.add_argument("--questions", type=int, default=0,
                        help="questions the LM writes per domain for its adaptation (default 0: headings only)")
    parser.add_argument("--time-cap", type=float, default=600.0, help="seconds of question writing per domain")
    add_lm_options(parser, role="the LM that writes them", cache=False)
    parser.add_argument("--cross-encoder", action="store_true",
                        help="also fine-tune the MiniLM cross-encoder as the passage judge, adapted "
                             "(minutes per domain)")
    parser.add_argument("--cross-encoder-pairs", type=int, default=2000, help="its training pairs (default 2000)")
    parser.add_argument("--cross-encoder-epochs", type=int, default=1, help="its passes over them (default 1)")
    parser.add_argument("--cross-encoder-seconds", type=float, default=600.0,
                        help="its training time cap per domain (default 600)")
    args = parser.parse_args(argv)
    domains = [d.strip() for d in args.domains.split(",") if d.strip()]
    unknown = [d for d in domains if d != "popqa" and d not in DOMAINS]
    if unknown or not domains:
        print(f"error: unknown domain(s) {unknown}; choose from {', '.join([*DOMAINS, 'popqa'])}", file=sys.stderr)
        return 2
    if args.questions < 0 or args.time_cap <= 0 or args.cross_encoder_seconds <= 0 \
            or args.cross_encoder_pairs < 1 or args.cross_encoder_epochs < 1:
        print("error: --questions must be 0 or more; --time-cap, --cross-encoder-seconds, --cross-encoder-pairs "
              "and --cross-encoder-epochs positive", file=sys.stderr)
        return 2
    if args.questions:
        lm_from(args)
    started = time.perf_counter()
    cross_encoder_options = {"max_pairs": args.cross_encoder_pairs, "epochs": args.cross_encoder_epochs,
                             "time_cap": args.cross_encoder_seconds}
    summary = run_transfer(domains, args.questions, args.time_cap, args.cross_encoder, cross_encoder_options,
                           log=lambda m: print(f"[{time.perf_counter() - started:7.1f} s] {m}", file=sys.stderr))
    meta = {"command": " ".join(["python -m experiments.transfer", *(argv if argv is not None else sys.argv[1:])]),
            "judges": "trained (program.judges.LinearJudge), no LM judging",
            "questions_written_per_domain": args.questions,
            "cross_encoder": cross_encoder_options if args.cross_encoder else False,
            "seconds": round(time.perf_counter() - started, 1)}
    path = write_summary(summary, Path(args.out), meta)
    print(format_table(summary))
    print(f"\nsaved {path} ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
