"""Fit the answer-confidence model on drafts of training questions, and report how it transfers.

Usage::

    # the rows: every draft accepted and unchecked (--accept 0 --verify-band 0, one LM call a
    # question), training splits only
    python -m optimize.evaluate --set kubernetes --split train --limit 50 --modes crag --accept 0 --verify-band 0 \\
        --web none --no-cache --groundedness off --out reports/confidence-rows/greedy/kubernetes-train
    # (the same for handbook 50 and adversarial 40; the committed model adds the 4 PopQA rows), then
    python -m optimize.train_confidence reports/confidence-rows/greedy/*-train \\
        reports/confidence-rows/popqa-train [--out compiled] [--decline 0.1]

Each row is one draft that did not abstain: its checks (``results.csv``'s ``draft_checks``,
``program.stages.draft.FEATURES``) and whether it was right (``draft_correct``; an answer to
an unanswerable question is wrong). A logistic regression (scikit-learn, L2, C=1) over the
checks is the confidence (selective QA's calibrator, Kamath et al. 2020). Printed: the AUROC of
the fitted model on each domain's rows in-domain (fit on every row) and with that domain left
out of the fit, beside each check's own AUROC and the default weights'. Saved (atomically) to
``<out>/confidence.json``: the weights, and ``accept``, the operating point that declines
``--decline`` of the right drafts of the training rows (``program index`` moves it per
knowledge base). Exit 2 on a folder without rows, one line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from optimize.selective import auroc
from program.atomic import write_atomic
from program.stages.draft import FEATURES, ConfidenceModel


def load_rows(folders: list[Path]) -> pd.DataFrame:
    """One row per non-abstaining draft: ``domain``, the ``FEATURES`` and ``right`` (bool).

    The drafts' checks are computed again by the current code (``recheck``): a row keeps what
    the LM said (the draft and its token probability), never what an older check made of it.

    Raises:
        ValueError: a folder without ``results.csv`` or ``summary.json``, or with no draft rows.
    """
    frames = []
    for folder in folders:
        path = Path(folder) / "results.csv"
        if not path.exists() or not (Path(folder) / "summary.json").exists():
            raise ValueError(f"{folder}: no results.csv and summary.json (run optimize.evaluate with --accept 0 first)")
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
        df = df[(df.get("draft_checks", "") != "") & (df["error"] == "")]
        if df.empty:
            raise ValueError(f"{path}: no draft rows")
        set_name = json.loads((Path(folder) / "summary.json").read_text(encoding="utf-8"))["set"]
        frame = recheck(set_name, df)
        frame = frame[~frame["abstained"]].drop(columns="abstained")
        frame["domain"] = set_name
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def recheck(set_name: str, df: pd.DataFrame) -> pd.DataFrame:
    """The checks of each row's draft over the passages the program retrieves and scores for
    its question (the knowledge base of ``set_name``, the compiled judges; no LM call)."""
    from eval_sets.domains import DOMAINS
    from program.app import resources
    from program.app.configuration import load_compiled
    from program.stages.draft import check_draft

    kb = resources.knowledge_base(DOMAINS[set_name].kb_dir if set_name in DOMAINS else None)
    crag = load_compiled(knowledge_base=kb, web=None)
    rows = []
    for question, draft, checks, right in zip(df["question"], df["draft"], df["draft_checks"], df["draft_correct"]):
        strips, grades = crag.draft_context(question)
        probability = json.loads(checks).get("token_probability")
        evidence = check_draft(question, draft, strips, {g.passage_id: g.score for g in grades}, probability)
        rows.append({**{f: getattr(evidence, f) for f in FEATURES}, "abstained": evidence.abstained,
                     "right": right == "True"})
    return pd.DataFrame(rows)


def fit(rows: pd.DataFrame) -> ConfidenceModel:
    """The logistic regression of ``right`` on ``FEATURES`` as a ``ConfidenceModel``."""
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=1.0, max_iter=1000).fit(rows[list(FEATURES)].to_numpy(float), rows["right"].to_numpy())
    weights = {f: round(float(w), 4) for f, w in zip(FEATURES, lr.coef_[0])}
    source = f"logistic regression on {len(rows)} training drafts of {', '.join(sorted(rows['domain'].unique()))}"
    return ConfidenceModel(weights=weights, bias=round(float(lr.intercept_[0]), 4), source=source)


def _scores(model: ConfidenceModel, rows: pd.DataFrame) -> list[float]:
    from program.stages.draft import DraftEvidence

    return [model.score(DraftEvidence(**{f: r[f] for f in FEATURES})) for _, r in rows.iterrows()]


def transfer_table(rows: pd.DataFrame) -> pd.DataFrame:
    """Per domain: rows, right share, AUROC in-domain (fit on all rows) and with the domain left
    out, the default weights' AUROC, and each check's own AUROC."""
    out = []
    for domain, own in rows.groupby("domain"):
        others = rows[rows["domain"] != domain]
        left_out = _scores(fit(others), own) if others["right"].nunique() == 2 else None
        row = {"domain": domain, "drafts": len(own), "right %": round(100 * own["right"].mean(), 1),
               "AUROC in-domain (fit on all rows)": auroc(_scores(fit(rows), own), own["right"].tolist()),
               "AUROC domain left out": auroc(left_out, own["right"].tolist()) if left_out else None,
               "AUROC default weights": auroc(_scores(ConfidenceModel(), own), own["right"].tolist())}
        row.update({f: auroc(own[f].tolist(), own["right"].tolist()) for f in FEATURES})
        out.append(row)
    return pd.DataFrame(out)


def operating_point(model: ConfidenceModel, rows: pd.DataFrame, decline: float) -> float:
    """The ``accept`` below which ``decline`` of the right drafts fall (their ``decline`` quantile)."""
    right = sorted(s for s, r in zip(_scores(model, rows), rows["right"]) if r)
    return round(float(np.quantile(right, decline)), 4) if right else 0.5


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m optimize.train_confidence", description=__doc__.split("\n")[0])
    p.add_argument("folders", nargs="+", type=Path, help="evaluation folders of training drafts (--accept 0)")
    p.add_argument("--out", type=Path, default=Path("compiled"), help="where confidence.json goes")
    p.add_argument("--decline", type=float, default=0.1, help="share of right training drafts the default declines")
    args = p.parse_args(argv)
    if not 0.0 <= args.decline < 1.0:
        print(f"error: --decline must be in [0, 1), got {args.decline}", file=sys.stderr)
        return 2
    try:
        rows = load_rows(args.folders)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    table = transfer_table(rows)
    print(table.to_markdown(index=False) if _has_tabulate() else table.to_string())
    model = fit(rows)
    accept = operating_point(model, rows, args.decline)
    print(f"\nweights {model.weights}, bias {model.bias}; accept {accept} "
          f"(declines {args.decline:.0%} of right drafts)")
    data = {"model": model.to_dict(), "accept": accept, "decline": args.decline, "rows": len(rows),
            "transfer": table.to_dict(orient="records")}
    args.out.mkdir(parents=True, exist_ok=True)
    write_atomic(args.out / "confidence.json", json.dumps(data, indent=2) + "\n")
    print(f"saved {args.out / 'confidence.json'}")
    return 0


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
