"""What changed between two runs of the same questions: ``python -m experiments.compare_runs BEFORE AFTER``.

BEFORE and AFTER are run folders (or their ``results.csv``) of ``optimize.evaluate``; ``--mode``
picks the mode compared (default ``crag``). Prints the
count of questions whose action, answer, verdict (right / declined / wrong) or draft changed,
the verdict transitions (``right -> declined: 3``), and one line per question whose verdict
changed: its id, the actions and the answers before and after.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import pandas as pd


def read(path: str, mode: str) -> pd.DataFrame:
    """The ``mode`` rows of a run's ``results.csv``, indexed by question id."""
    csv = Path(path) / "results.csv" if Path(path).is_dir() else Path(path)
    rows = pd.read_csv(csv, dtype=str, keep_default_na=False)
    return rows[rows["mode"] == mode].set_index("id")


def verdict(row) -> str:
    """``right``, ``declined`` or ``wrong``: how truthfulness counts the row (+1, 0, -1)."""
    if row["correct"] == "True":
        return "right"
    return "declined" if row["fallback"] == "True" or row["abstained"] == "True" else "wrong"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.compare_runs", description=__doc__.split("\n")[0])
    p.add_argument("before")
    p.add_argument("after")
    p.add_argument("--mode", default="crag")
    args = p.parse_args(argv)
    before, after = read(args.before, args.mode), read(args.after, args.mode)
    common = before.index.intersection(after.index)
    print(f"{len(common)} questions in both ({len(before)} before, {len(after)} after)")
    for column in ("action", "answer", "draft"):
        changed = sum(before.at[q, column] != after.at[q, column] for q in common)
        print(f"{column} changed: {changed}")
    moves = Counter((verdict(before.loc[q]), verdict(after.loc[q])) for q in common)
    for (was, now), n in sorted(moves.items()):
        if was != now:
            print(f"{was} -> {now}: {n}")
    for q in common:
        was, now = verdict(before.loc[q]), verdict(after.loc[q])
        if was != now:
            print(f"  {q} ({before.at[q, 'relation']}): {was} -> {now}; action {before.at[q, 'action']} -> "
                  f"{after.at[q, 'action']}; {before.at[q, 'answer'][:80]!r} -> {after.at[q, 'answer'][:80]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
