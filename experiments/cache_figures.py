"""Where a run's seconds go and what the prompt cache served: ``python -m experiments.cache_figures RUN [RUN ...]``.

For each run folder of ``optimize.evaluate`` (its ``steps.csv`` and ``results.csv``), the mode's
median seconds a question, the draft step's median seconds, their ratio, the claim check's
(``verify``) median seconds over the questions it ran for and its ratio to the draft's, and per
step with LM calls the medians of prompt tokens sent, served from the cache and read
(``optimize.report._step_medians``; runs from before the cache was counted have no cached
column: their ``cached`` and ``read`` are empty). Prints a Markdown table per run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from optimize.metrics import median
from optimize.report import _step_medians, read_results, read_steps

STEPS = ("draft", "verify", "self-check", "rewrite", "generate", "generate-strict", "usefulness")


def figures(run: Path, mode: str = "crag") -> dict:
    """``{"n", "median_s", "draft_s", "ratio", "verify_s", "verify_ratio", "verify_ran", "steps"}`` of one run."""
    results = read_results(run / "results.csv")
    results = results[(results["mode"] == mode) & (results["error"] == "")]
    steps = read_steps(run / "steps.csv")
    steps = steps[(steps["mode"] == mode) & steps["id"].isin(set(results["id"]))]
    per_step = {name: _step_medians(steps[steps["step"] == name]) for name in STEPS if (steps["step"] == name).any()}
    total = median(results["seconds"].tolist())
    draft = per_step.get("draft", {}).get("median_seconds")
    verify = per_step.get("verify", {}).get("median_seconds")
    return {"n": len(results), "median_s": total, "draft_s": draft,
            "ratio": round(total / draft, 2) if total and draft else None, "verify_s": verify,
            "verify_ratio": round(verify / draft, 2) if verify and draft else None,
            "verify_ran": int(steps.loc[steps["step"] == "verify", "id"].nunique()), "steps": per_step}


def _cell(v) -> str:
    return "-" if v is None else f"{v:g}" if isinstance(v, float) else str(v)


def table(run: Path, f: dict) -> str:
    lines = [f"{run}: {f['n']} questions; median s {_cell(f['median_s'])}, draft {_cell(f['draft_s'])} "
             f"(ratio {_cell(f['ratio'])}); verify {_cell(f['verify_s'])} s on {f['verify_ran']} "
             f"(ratio to the draft {_cell(f['verify_ratio'])})", "",
             "| step | median s | prompt tokens sent | from the cache | read |", "|---|---|---|---|---|"]
    for name, s in f["steps"].items():
        lines.append(f"| {name} | {_cell(s.get('median_seconds'))} | {_cell(s.get('median_prompt_tokens'))} | "
                     f"{_cell(s.get('median_cached_tokens'))} | {_cell(s.get('median_read_tokens'))} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.cache_figures", description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+")
    p.add_argument("--mode", default="crag")
    args = p.parse_args(argv)
    for run in map(Path, args.runs):
        print(table(run, figures(run, args.mode)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
