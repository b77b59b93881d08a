"""Judges that follow the documents: a refit after a one-file change against a full re-adaptation.

    python -m experiments.bench_refit --domain kubernetes --changes 3
    python -m experiments.bench_refit --domain handbook --changes 3 --out reports/refit/handbook

A labeled domain's documents are copied and indexed, and the judges adapted to them with that
domain's labels left out (``--leave-out``, as ``experiments.transfer``'s *adapted* variant: its
labels are never learned from). Then ``--changes`` times, one more file is edited (a paragraph
added at its end, a seeded choice), the knowledge base re-indexed (only that file), and the judges
adapted twice to the new version:

* *refit*: the rows of the unchanged files kept, the changed file's made again, the judges fit
  (``program.adaptation.own_rows``);
* *full*: every row made again and fit (``force``), what ``index`` did before.

Each is timed and measured on the domain's labeled test rows with ``experiments.transfer``'s
figures (action accuracy, passage AUC, strip F1, support accuracy). The refit should take seconds
and measure within noise of the full re-adaptation: the table gives refit minus full per figure.
No LM is called. Writes ``summary.json`` under ``--out``; run it alone (wall times on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

from experiments.transfer import FIGURES, measure_domain, write_summary

PARAGRAPH = ("\n\n## Review notes\n\nThis page is reviewed every quarter; the next review adds the changes agreed "
             "at the spring meeting.\n")


def _adapt(kb, compiled, domain: str, force: bool) -> tuple[object, float]:
    from program.adaptation.adapt import adapt_judges

    started = time.perf_counter()
    result = adapt_judges(kb, compiled, leave_out=(domain,), force=force, log=lambda *_: None, progress=False)
    return result, time.perf_counter() - started


def run(domain: str, changes: int, seed: int = 0, log=print) -> dict:
    """The benchmark on one labeled domain (see the module docstring); its summary."""
    from eval_sets.domains import DOMAINS
    from program.app.compiled import COMPILED_DIR
    from program.app.resources import embedder as shared_embedder
    from program.retrieval import KnowledgeBase

    embedder = shared_embedder()
    with tempfile.TemporaryDirectory(prefix="bench-refit-") as tmp:
        tmp = Path(tmp)
        os.environ["CRAG_STATE_DIR"] = str(tmp / "state")
        folder = tmp / "docs"
        shutil.copytree(DOMAINS[domain].kb_dir, folder)
        kb = KnowledgeBase.build(folder, tmp / "index", embedder)
        first, seconds = _adapt(kb, COMPILED_DIR, domain, force=True)
        log(f"{domain}: first adaptation {seconds:.0f} s ({first.refresh.line()})")
        files = sorted(p for p in folder.rglob("*.md"))
        picked = random.Random(seed).sample(files, changes)
        rows = []
        for n, path in enumerate(picked, start=1):
            path.write_text(path.read_text(encoding="utf-8") + PARAGRAPH, encoding="utf-8")
            kb = KnowledgeBase.build(folder, tmp / "index", embedder)
            refit, refit_seconds = _adapt(kb, COMPILED_DIR, domain, force=False)
            refit_figures = measure_domain(refit.judges, domain, kb, embedder)
            full, full_seconds = _adapt(kb, COMPILED_DIR, domain, force=True)
            full_figures = measure_domain(full.judges, domain, kb, embedder)
            rows.append({"change": n, "file": path.relative_to(folder).as_posix(), "index": kb.changes.line(),
                         "refit": {"how": refit.refresh.how, "share": round(refit.refresh.share, 4),
                                   "seconds": round(refit_seconds, 1), **{f: refit_figures[f] for f in FIGURES}},
                         "full": {"seconds": round(full_seconds, 1), **{f: full_figures[f] for f in FIGURES}}})
            log(f"change {n} ({rows[-1]['file']}): refit {refit_seconds:.0f} s ({refit.refresh.how}), "
                f"full {full_seconds:.0f} s; " + "; ".join(
                    f"{f} {refit_figures[f]:.3f} / {full_figures[f]:.3f}" for f in FIGURES))
    return {"domain": domain, "changes": rows, "rows": refit_figures["rows"], "splits": refit_figures["splits"]}


def table(summary: dict) -> str:
    """The summary as a Markdown table: seconds, then each figure as refit / full."""
    lines = ["| change | refit (s) | full (s) | " + " | ".join(f"{f} refit / full" for f in FIGURES) + " |",
             "|---|---|---|" + "---|" * len(FIGURES)]
    for r in summary["changes"]:
        cells = [f"{r['refit'][f]:.3f} / {r['full'][f]:.3f}" for f in FIGURES]
        lines.append(f"| {r['change']}: {r['file']} | {r['refit']['seconds']} | {r['full']['seconds']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", default="kubernetes", choices=("kubernetes", "handbook", "adversarial"))
    parser.add_argument("--changes", type=int, default=3, help="one-file changes made one after another")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="folder for summary.json (default: print only)")
    args = parser.parse_args(argv)
    summary = run(args.domain, args.changes, args.seed)
    print(table(summary))
    if args.out:
        write_summary(summary, Path(args.out), {"arguments": list(argv or sys.argv[1:])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
