"""The trade of operating points replayed on a committed run's drafts, no LM call:
``python -m experiments.operating_point_replay RESULTS_CSV [--confidence compiled/confidence.json] NAME=ACCEPT ...``

Each draft of the run (its ``draft_checks``, the same compile and greedy decoding, so the same
drafts) is scored by the confidence model, and each point prints right answers kept, unanswerable
questions declined and truthfulness (``optimize.operating_point.trade_at``), beside the model's
own point. This is the draft's decision only: the corrective path and the claim check of a real
run are not replayed.
"""

from __future__ import annotations

import argparse
import csv
import json

from optimize.operating_point import Labeled, trade_at
from program.app.compiled import read_confidence_file
from program.stages.draft import DraftEvidence


def drafts_of(path: str, model) -> list[Labeled]:
    """One ``Labeled`` per crag row of ``path``; a row with no draft (an error) is a decline."""
    out = []
    for r in csv.DictReader(open(path, newline="", encoding="utf-8")):
        if r["mode"] != "crag":
            continue
        checks = json.loads(r["draft_checks"] or '{"abstained": true}')
        evidence = DraftEvidence(**{k: v for k, v in checks.items() if k in DraftEvidence.__dataclass_fields__})
        answerable = r["answerable"] == "True"
        out.append(Labeled(0.0 if evidence.abstained else model.score(evidence), bool(evidence.abstained),
                           answerable and r["draft_correct"] == "True", answerable))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.operating_point_replay", description=__doc__.split("\n")[0])
    p.add_argument("results", help="a run's results.csv with crag rows")
    p.add_argument("points", nargs="*", metavar="NAME=ACCEPT", help="points to replay, e.g. chosen=0.5233")
    p.add_argument("--confidence", default="compiled/confidence.json")
    args = p.parse_args(argv)
    model, own = read_confidence_file(args.confidence)
    drafts = drafts_of(args.results, model)
    print(f"{len(drafts)} drafts, {sum(d.right for d in drafts)} right\n")
    print("| point | accept | right answers kept | unanswerable declined | truthfulness |\n|---|---|---|---|---|")
    for name, accept in [tuple(x.split("=", 1)) for x in args.points] + [(f"{args.confidence}", own)]:
        print(trade_at(drafts, float(accept)).line(name))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
