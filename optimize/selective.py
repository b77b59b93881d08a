"""Selective question answering's figures: truthfulness, the confidence's AUROC, risk and coverage.

A system that may decline is judged by what it says and by what it declines (Kamath et al.
2020, "Selective Question Answering under Domain Shift"; Meta's CRAG benchmark, KDD Cup 2024):

* ``truthfulness``: the CRAG benchmark's score, in points: a right answer +1, "I don't know" 0,
  a wrong answer -1, averaged over the questions and times 100. Declining a question the
  documents do not answer is right (+1); answering it is wrong.
* ``confidence_auroc``: how well the confidence ranks right answers above wrong ones; the
  answer ranked is the one given, or the one declined (``candidate_correct``).
* ``risk_coverage``: accuracy among the questions answered when only the most confident
  ``coverage`` share is answered (the rest declined), at 100, 90, 80 and 70 %.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

COVERAGES = (1.0, 0.9, 0.8, 0.7)


def truthfulness(df: pd.DataFrame) -> float | None:
    """The CRAG benchmark's truthfulness of ``df``'s rows in points in [-100, 100]; None without rows.

    Needs the columns ``correct``, ``abstained`` and ``answerable`` (bool). A row is right when
    ``correct``; "I don't know" when it abstained on an answerable question; wrong otherwise.
    """
    if df.empty:
        return None
    right = df["correct"]
    missing = ~right & df["abstained"] & df["answerable"]
    wrong = ~right & ~missing
    return round(100 * float(right.sum() - wrong.sum()) / len(df), 1)


def auroc(scores: list[float], labels: list[bool]) -> float | None:
    """The area under the ROC curve of ``scores`` against ``labels`` (ties count half), in [0, 1];
    None when every label is the same (no pair to rank)."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)


def _candidate(df: pd.DataFrame) -> pd.Series:
    """Whether the answer the confidence speaks for was right (older files: ``correct``)."""
    if "candidate_correct" in df and df["candidate_correct"].astype(str).isin(["True", "False"]).all():
        return df["candidate_correct"].astype(str).eq("True")
    return df["correct"].astype(bool)


def risk_coverage(df: pd.DataFrame, coverages=COVERAGES) -> dict[str, float | None] | None:
    """Accuracy (in %) among the answered questions when the ``coverage`` most confident are
    answered, per coverage (``"100"``, ``"90"``...); None when no row has a confidence.

    Rows are ranked by ``confidence`` (highest first; ties in the file's order); an answered
    row is right when ``candidate_correct``.
    """
    rows = df[df["confidence"].notna()]
    if rows.empty:
        return None
    ranked = _candidate(rows).loc[rows["confidence"].sort_values(ascending=False, kind="stable").index]
    out = {}
    for c in coverages:
        n = max(1, round(c * len(ranked)))
        out[str(round(100 * c))] = round(100 * float(ranked.iloc[:n].mean()), 1)
    return out


def selective_figures(df: pd.DataFrame) -> dict:
    """``truthfulness``, ``confidence_auroc`` and ``risk_coverage`` of one mode's rows."""
    scored = df[df["confidence"].notna()]
    return {"truthfulness": truthfulness(df),
            "confidence_auroc": auroc(scored["confidence"].tolist(), _candidate(scored).tolist())
                                if len(scored) else None,
            "risk_coverage": risk_coverage(df)}


def plot_risk_coverage(results: pd.DataFrame, path: str | Path, title: str) -> Path | None:
    """Accuracy among answered questions against coverage, one line per mode with a confidence;
    the PNG's path, or None when no mode has one."""
    try:
        import matplotlib
    except ImportError:  # an extra (pip install 'crag-dspy[plots]'): the figures are in the summary
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.5))
    drawn = False
    for mode, rows in results.groupby("mode", sort=False):
        grid = [i / 20 for i in range(20, 4, -1)]
        curve = risk_coverage(rows, grid)
        if curve:
            ax.plot([100 * c for c in grid], list(curve.values()), marker=".", label=str(mode))
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("questions answered (%)")
    ax.set_ylabel("accuracy among answered (%)")
    ax.set_title(title, fontsize=9)
    ax.invert_xaxis()
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
