"""Signals of a draft being right that the draft's checks lack, measured on the confidence rows.

For each non-abstaining greedy draft of the confidence model's training rows (``--accept 0``
runs), over the strips the program reads (``CRAG.draft_context``):

- ``agreement`` (``--samples N``): self-consistency (Manakul et al. 2023, SelfCheckGPT; Lin et
  al. 2023, lexical similarity between samples). The reader answers the same prompt N more
  times at ``--temperature``; the mean content-word F1 between the draft and each sample (an
  abstaining sample agrees 0). llama.cpp's prompt cache makes each sample cost its written
  tokens only.
- ``token_min``, ``token_first``: the answer's least probable token and the mean probability of
  its first three (beside the geometric mean the checks already hold), from the draft's own call
  made again (``--p-true`` or ``--tokens``).
- ``p_true`` (``--p-true``): Kadavath et al. 2022's P(True): the draft's conversation continued
  with "Is that answer stated by the numbered context? yes or no", the probability of "yes"
  from the first token's alternatives. It shares the draft's whole prompt, so it costs about
  thirty prompt tokens and one written token.

Usage::

    python -m experiments.draft_signals reports/confidence-rows/greedy/*-train \\
        --limit 20 --p-true --out reports/confidence-rows/greedy/signals.csv
    python -m experiments.draft_signals --report-only --out reports/confidence-rows/greedy/signals.csv

Prints, per domain, each signal's AUROC against the draft being right, and the confidence
model's (a logistic regression on the checks, fit with that domain left out) without and with
each signal. Writes one CSV row per draft.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import pandas as pd
from sklearn.linear_model import LogisticRegression

from optimize.selective import auroc
from program.lm.token_scores import field_token_logprobs
from program.stages.draft import FEATURES, check_draft
from program.stages.generation import DRAFT_CONFIG, number_strips
from program.stages.selfcheck import is_abstention
from program.text import content_words

SIGNALS = ("agreement", "token_min", "token_first", "p_true")
P_TRUE_QUESTION = ("Is that answer stated by the numbered context above? "
                   "Reply with one word: yes or no.")


def agreement(draft: str, sample: str) -> float:
    """Content-word F1 of ``sample`` against ``draft`` (citation markers ignored); 0.0 when the
    sample abstains or they share no content word."""
    if is_abstention(sample):
        return 0.0
    a, b = content_words(draft), content_words(sample)
    common = len(a & b)
    return 0.0 if not common else 2 * common / (len(a) + len(b))


def p_true(lm, messages: list[dict], reply: str) -> float | None:
    """P(yes) that the reply is stated by the context, asked as the next turn of the draft's
    conversation (``messages`` and its ``reply``, as DSPy sent and received them)."""
    turn = messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": P_TRUE_QUESTION}]
    out = lm(messages=turn, temperature=0.0, max_tokens=3, logprobs=True, top_logprobs=10)[0]
    if not isinstance(out, dict) or not out.get("logprobs"):
        return None
    content = out["logprobs"]["content"] if isinstance(out["logprobs"], dict) else out["logprobs"]
    first = next((e for e in content if str(e.get("token", "")).strip()), None)
    if first is None:
        return None
    yes = sum(math.exp(a["logprob"]) for a in first.get("top_logprobs") or [] if a["token"].strip().lower() == "yes")
    no = sum(math.exp(a["logprob"]) for a in first.get("top_logprobs") or [] if a["token"].strip().lower() == "no")
    return yes / (yes + no) if yes + no else None


def collect(folder: Path, limit: int, samples: int, temperature: float, lm_signals: bool, skip: int = 0) -> list[dict]:
    import dspy

    from eval_sets.domains import DOMAINS
    from program.app import resources
    from program.app.configuration import load_compiled

    set_name = json.loads((folder / "summary.json").read_text(encoding="utf-8"))["set"]
    df = pd.read_csv(folder / "results.csv", dtype=str, keep_default_na=False)
    df = df[(df["draft_checks"] != "") & (df["error"] == "")].iloc[skip:]
    kb = resources.knowledge_base(DOMAINS[set_name].kb_dir if set_name in DOMAINS else None)
    crag = load_compiled(knowledge_base=kb, web=None)
    lm = dspy.settings.lm
    rows = []
    for question, draft, checks, right in zip(df["question"], df["draft"], df["draft_checks"], df["draft_correct"]):
        strips, grades = crag.draft_context(question)
        evidence = check_draft(question, draft, strips, {g.passage_id: g.score for g in grades},
                               json.loads(checks).get("token_probability"))
        if evidence.abstained:
            continue
        started, row = time.monotonic(), {}
        context = number_strips(strips)
        if lm_signals:  # the draft's call again, then its next turn
            out = crag.generator.generate(question=question, context=context, config=DRAFT_CONFIG)
            entry = lm.history[-1]
            logs = field_token_logprobs(out.get("logprobs"), "answer")
            probs = [math.exp(x) for x in logs]
            row["token_min"] = min(probs) if probs else 0.5
            row["token_first"] = sum(probs[:3]) / len(probs[:3]) if probs else 0.5
            reply = entry["outputs"][0]["text"] if isinstance(entry["outputs"][0], dict) else entry["outputs"][0]
            row["p_true"] = p_true(lm, entry["messages"], reply)
            row["redrafted"] = str(out.answer).strip()
        if samples:
            written = [str(crag.generator.generate(question=question, context=context,
                                                   config={"temperature": temperature, "seed": s}).answer).strip()
                       for s in range(1, samples + 1)]
            row["agreement"] = sum(agreement(draft, w) for w in written) / samples
            row["samples"] = json.dumps(written)
        rows.append({"domain": set_name, "question": question, "right": right == "True",
                     **{f: getattr(evidence, f) for f in FEATURES}, **row,
                     "seconds": round(time.monotonic() - started, 1)})
        print(f"{set_name} {len(rows)}: right={right} " + " ".join(f"{k}={row[k]:.2f}" for k in SIGNALS
                                                                  if isinstance(row.get(k), float))
              + f" ({rows[-1]['seconds']} s)", flush=True)
        if len(rows) >= limit:
            break
    return rows


def report(rows: pd.DataFrame) -> pd.DataFrame:
    """Per domain: drafts, right %, each signal's AUROC, and the left-out confidence model's
    AUROC on the checks alone and with each signal added."""
    signals = [s for s in SIGNALS if s in rows and rows[s].notna().all()]
    out = []
    for domain, own in rows.groupby("domain"):
        others = rows[rows["domain"] != domain]
        truth = own["right"].tolist()
        row = {"domain": domain, "drafts": len(own), "right %": round(100 * own["right"].mean(), 1)}
        row.update({f"{s} AUROC": auroc(own[s].tolist(), truth) for s in signals})
        if others["right"].nunique() < 2:
            out.append(row)
            continue
        for label, names in [("checks", FEATURES)] + [(f"+ {s}", FEATURES + (s,)) for s in signals]:
            lr = LogisticRegression(C=1.0, max_iter=1000).fit(others[list(names)].to_numpy(float),
                                                               others["right"].to_numpy())
            row[f"left out, {label}"] = auroc(lr.decision_function(own[list(names)].to_numpy(float)).tolist(), truth)
        out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.draft_signals", description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="*", type=Path)
    p.add_argument("--limit", type=int, default=20, help="drafts per folder")
    p.add_argument("--skip", type=int, default=0,
                   help="rows of each folder to pass over first (a run's rows on top of --append)")
    p.add_argument("--append", action="store_true", help="add to the rows already in --out")
    p.add_argument("--samples", type=int, default=0, help="sampled answers per draft (agreement)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--p-true", action="store_true", help="the draft's call again: token variants and P(True)")
    p.add_argument("--out", type=Path, required=True, help="CSV of the rows (read again with --report-only)")
    p.add_argument("--report-only", action="store_true", help="only print the table of an existing --out")
    args = p.parse_args(argv)
    if not args.report_only:
        from program.lm.configure import configure_lm

        configure_lm().cache = False  # every call really made: the prompt cache is the point
        rows = pd.read_csv(args.out).to_dict("records") if args.append and args.out.exists() else []
        for folder in args.folders:
            rows += collect(folder, args.limit, args.samples, args.temperature, args.p_true, args.skip)
            pd.DataFrame(rows).to_csv(args.out, index=False)
    print(report(pd.read_csv(args.out)).round(3).to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
