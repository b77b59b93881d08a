"""The claim check's quality on its dev rows, asked in its own prompt and continuing the reader's call.

``python -m experiments.continued_checks [--rows 68] [--out reports/continued-checks]``

The program asks ``CheckClaimSupport`` as the next turn of the reader's conversation
(``program.lm.continuation``), naming the cited strip instead of sending it again. This asks the
committed compile's check on the labeled support dev rows both ways: ``own`` (its own prompt, the
evidence sent, as before) and ``continued`` (``optimize.continued.ContinuedCheck``: the reader's
prompt over the evidence as strip [1], the claim as its answer, then the check). Reported for each:
the quote's verdict accuracy (the compile's figure), the self-check's (the better of it and word
overlap's), and how often the two layouts reach the same verdict. Seconds here are not the
program's: each row's reading is new, so nothing of it is cached. Writes ``summary.json`` and
``rows.csv`` under ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path

import dspy

from optimize import predictor_metrics as pm
from optimize.compile import labeled_examples
from optimize.continued import ContinuedCheck
from program.atomic import write_atomic
from program.lm.adapter import inputs_as_data
from program.lm.configure import CRITIQUE_CONFIG, configure_lm
from program.paths import COMPILED_DIR
from program.stages.selfcheck import RANKED_VERDICTS, judge_support, lexical_support
from signatures import CheckClaimSupport


def committed_check(compiled: Path) -> dspy.Predict:
    """The compile's ``checker.support`` predictor (instructions and demos as saved)."""
    check = dspy.Predict(CheckClaimSupport)
    state = json.loads((compiled / "crag.json").read_text(encoding="utf-8"))
    check.load_state(state["checker.support"])
    return check


def ask(layout: str, check: dspy.Predict, example) -> str:
    """The quote ``check`` gives for the row in ``layout`` (``own`` or ``continued``); NONE when unparsed."""
    try:
        if layout == "continued":
            return str(ContinuedCheck(check)(claim=example.claim, evidence=example.evidence).quote)
        with inputs_as_data():
            return str(check(claim=example.claim, evidence=example.evidence, config=CRITIQUE_CONFIG).quote)
    except Exception:  # an unparsed reply is a row the check got wrong
        return "NONE"


def decided(example, quote: str) -> str:
    """The self-check's verdict from ``quote``: the better of it and word overlap's (``decide_support``, 2 and 4)."""
    return max(lexical_support(example.claim, example.evidence), judge_support(example.claim, quote, example.evidence),
               key=RANKED_VERDICTS.index)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=None, help="dev rows (a seeded sample; default all)")
    parser.add_argument("--compiled", default=str(COMPILED_DIR))
    parser.add_argument("--out", default="reports/continued-checks")
    args = parser.parse_args(argv)
    lm = configure_lm()
    check = committed_check(Path(args.compiled))
    rows = labeled_examples("support", "dev", args.rows)
    out, records, summary = Path(args.out), [], {"rows": len(rows)}
    for layout in ("own", "continued"):
        started, calls = time.perf_counter(), len(lm.history)
        quotes = [ask(layout, check, e) for e in rows]
        usage = [h.get("usage") or {} for h in lm.history[calls:]]
        summary[layout] = {
            "quote_accuracy": pm._mean(judge_support(e.claim, q, e.evidence) == e.support
                                       for e, q in zip(rows, quotes)),
            "self_check_accuracy": pm._mean(decided(e, q) == e.support for e, q in zip(rows, quotes)),
            "seconds": round(time.perf_counter() - started, 1), "lm_calls": len(usage),
            "prompt_tokens": sum(int(u.get("prompt_tokens") or 0) for u in usage)}
        records.append(quotes)
    same = [decided(e, a) == decided(e, b) for e, a, b in zip(rows, *records)]
    summary["same_verdict"] = pm._mean(same)
    summary["different"] = [e.id for e, s in zip(rows, same) if not s]
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "summary.json", json.dumps(summary, indent=2))
    with open(out / "rows.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "support", "own_quote", "own_verdict", "continued_quote", "continued_verdict"])
        for e, a, b in zip(rows, *records):
            w.writerow([e.id, e.support, a, decided(e, a), b, decided(e, b)])
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
