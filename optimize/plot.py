"""The run's picture: accuracy against cost, one labelled point per mode (matplotlib, Agg backend)."""

from __future__ import annotations

from pathlib import Path

PLOT_FILE = "accuracy_vs_cost.png"


def plot_modes(summary: dict[str, dict], path: str | Path, title: str = "") -> Path | None:
    """Write a PNG with two panels: accuracy (%) against median LM calls per question, and
    against median seconds per question; one labelled point per mode.

    Args:
        summary: per-mode figures (:func:`optimize.report.summarize`); modes without an
            accuracy (build failed, no rows) are left out.
        path: the PNG file to write (its folder must exist).
        title: the figure's title.

    Returns:
        ``path``, or None when no mode has an accuracy (nothing is written).
    """
    points = [(m, s) for m, s in summary.items() if s.get("accuracy") is not None]
    if not points:
        return None
    try:
        import matplotlib
    except ImportError:  # an extra (pip install 'crag-dspy[plots]'): the figures are in the summary
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 2, figsize=(9, 4), sharey=True)
    for ax, key, label in ((axes[0], "median_lm_calls", "median LM calls per question"),
                           (axes[1], "median_seconds", "median seconds per question")):
        for mode, s in points:
            x = s.get(key) or 0
            ax.scatter([x], [s["accuracy"]], s=40)
            ax.annotate(mode, (x, s["accuracy"]), textcoords="offset points", xytext=(5, 5))
        ax.set_xlabel(label)
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, 1.2 * max((s.get(key) or 0) for _, s in points) or 1)  # room for the labels
        ax.xaxis.set_major_locator(MaxNLocator(5))
    axes[0].set_ylabel("accuracy (%)")
    axes[0].set_ylim(0, 100)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
