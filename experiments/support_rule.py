"""Claim support by the trained judge alone, or by the better of it and word overlap, on dev rows.

The self-check once took the trained support judge's verdict alone, where the citations took
the better of it and the word-overlap verdict (``program.stages.selfcheck.lexical_support``).
One rule now decides both (``decide_support``: the better of the two). This study measures
both rules, and word overlap alone, on the rows the compile reports the support judge on, with
the committed judges and no LM call:

- PopQA ``dev`` claims (``optimize.training.pairs.popqa_claims``, 458 rows labeled ``fully`` /
  ``no``): right when the claim is kept (``partially`` or ``fully``) exactly when it is supported;
- the help centre's ``dev`` support rows (68, labeled ``fully`` / ``partially`` / ``no``):
  right when the verdict equals the label.

Usage::

    python -m experiments.support_rule [--compiled compiled]    # about 50 s on 2 cores
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from program.judges import JudgeChoice, load_judges
from program.judgments import SUPPORT, support
from program.stages.selfcheck import decide_support


def verdicts(judges, row: dict) -> dict:
    """``{"judge alone", "better of judge and overlap", "overlap alone"}`` -> the verdict for one
    row (``claim``, ``evidence``, ``question``), the trained judge deciding (no LM call)."""
    decided = decide_support(row["claim"], row["evidence"], row.get("question", ""), judges,
                             quote=lambda claim, evidence: "", choice=JudgeChoice("trained"))
    alone = decided.verdict if decided.score is None else support.verdict(judges, decided.score)
    return {"judge alone": "fully" if decided.lexical == "fully" else alone,
            "better of judge and overlap": decided.verdict, "overlap alone": decided.lexical}


def accuracy(judges, rows: list[dict], kept_only: bool) -> dict:
    """Each rule's share of ``rows`` decided right (``kept_only``: kept or not, as PopQA's labels)."""
    right: dict[str, int] = {}
    for row in rows:
        for rule, verdict in verdicts(judges, row).items():
            ok = (verdict != "no") == (row["support"] != "no") if kept_only else verdict == row["support"]
            right[rule] = right.get(rule, 0) + ok
    return {"rows": len(rows), **{rule: round(n / len(rows), 3) for rule, n in right.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--compiled", default="compiled", help="the folder holding judges.json")
    args = parser.parse_args(argv)
    # lazy on purpose: loading the PopQA knowledge base and the embedder is the study's cost, not --help's
    from eval_sets import adversarial
    from eval_sets.popqa import load_questions
    from optimize.training.pairs import popqa_claims
    from program.app import resources

    judges = load_judges(args.compiled)
    judges = replace(judges, embedder=resources.embedder())
    figures = {"popqa dev claims, kept right": accuracy(judges, popqa_claims(load_questions(split="dev"),
                                                                              resources.knowledge_base()), True),
               "help centre dev support rows, verdict right": accuracy(judges,
                                                                       adversarial.load_rows(SUPPORT.rows, "dev"),
                                                                       False)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
