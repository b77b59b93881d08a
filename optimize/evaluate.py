"""Metric-driven evaluation runs: the same questions and LM through several program modes.

Usage::

    python -m optimize.evaluate --set popqa --limit 50 --modes closed,rag,crag \\
        [--model embedded-1.5b] [--seed 0] [--out DIR] [--compiled compiled] [--no-cache]
    python -m optimize.evaluate --set adversarial --split dev --modes rag,crag

Output folder (default ``results/<YYYY-MM-DD>-<HHMMSS>-<set>/``):

* ``results.csv``: one row per (mode, question), appended and flushed row by row, so a
  run killed half way keeps what it did. Columns: ``CSV_COLUMNS``. ``seconds`` is the
  wall-clock time of the program call (float, s); ``correct`` is ``True``/``False``;
  ``action`` is ``correct|ambiguous|incorrect`` or empty; ``error`` is ``"Type: message"``
  when the program raised (the run goes on; such a row counts as not correct and its cost
  columns are empty).
* ``summary.json``: per mode ``n``, ``errors``, ``accuracy`` (%, errors count as wrong),
  ``actions`` (counts, or null without an evaluator), ``fallback_rate`` (%),
  ``escalation_rate`` (% of graded questions whose CORRECT route fell through to the web),
  ``median_lm_calls``, ``median_tokens`` (prompt + completion), ``median_seconds``, and on
  the adversarial set ``action_accuracy`` (% of evaluator actions equal to ``expected_action``).

Correctness: PopQA uses the CRAG paper's rule (:func:`optimize.metrics.answer_correct` on
``possible_answers``). Adversarial rows use ``gold_answers`` the same way; a row marked
``answerable: false`` is correct when the honest fallback fired instead.

Exit codes: 0 done, 1 a mode's program could not be built, 2 bad arguments or unsupported
set, 130 interrupted by Ctrl-C or SIGTERM (the summary of what was done is still written).
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import importlib
import json
import signal
import sys
import time
from pathlib import Path

from tqdm import tqdm

from optimize.metrics import answer_correct, median, rate

CSV_COLUMNS = [
    "id", "question", "relation", "mode", "answer", "correct", "action", "expected_action",
    "confidence", "fallback", "escalated", "lm_calls", "prompt_tokens", "completion_tokens", "seconds",
    "error", "gold",
]
ACTIONS = ("correct", "ambiguous", "incorrect")
FALLBACK_TEXT = "I don't have reliable information on this."


def _adversarial_loader():
    """``eval_sets.adversarial.load_rows`` if that helper exists, else None."""
    try:
        mod = importlib.import_module("eval_sets.adversarial")
    except ImportError:
        return None
    return getattr(mod, "load_rows", None)


def load_set(name: str, limit: int | None, seed: int, split: str = "dev") -> list[dict]:
    """Load an evaluation set as uniform rows.

    Returns:
        Dicts with ``id``, ``question``, ``relation`` (PopQA relation, or the adversarial
        row's ``category``/empty), ``gold`` (list[str]), ``expected_action`` (str or None),
        ``answerable`` (bool).

    Raises:
        SystemExit(2): unknown set, ``adversarial`` while its loader does not exist, or a split
            the adversarial loader rejects (ValueError from ``load_rows``).
    """
    if name == "popqa":
        from eval_sets.popqa import load_questions

        return [
            {"id": q["id"], "question": q["question"], "relation": q["relation"] or "",
             "gold": list(q["possible_answers"] or []), "expected_action": None, "answerable": True}
            for q in load_questions(limit=limit, seed=seed)
        ]
    if name == "adversarial":
        load_rows = _adversarial_loader()
        if load_rows is None:
            print("error: --set adversarial is not yet supported "
                  "(eval_sets.adversarial.load_rows does not exist yet)", file=sys.stderr)
            raise SystemExit(2)
        try:
            raw = load_rows("queries", split)
        except ValueError as exc:  # e.g. a split the set does not have
            print(f"error: --set adversarial --split {split}: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
        rows = []
        for i, r in enumerate(raw):
            rows.append({
                "id": str(r.get("id") or f"{split}-{i:04d}"), "question": r["question"],
                "relation": str(r.get("category") or ""), "gold": list(r.get("gold_answers") or []),
                "expected_action": (str(r["expected_action"]).lower() if r.get("expected_action") else None),
                "answerable": bool(r.get("answerable", True)),
            })
        return rows[:limit] if limit else rows
    print(f"error: unknown --set {name!r} (popqa, adversarial)", file=sys.stderr)
    raise SystemExit(2)


def is_correct(row: dict, answer: str, fallback: bool) -> bool:
    """Correctness of one answer for ``row`` (rule in the module docstring)."""
    if not row["answerable"]:
        return bool(fallback) or FALLBACK_TEXT.casefold() in (answer or "").casefold()
    return answer_correct(answer, row["gold"])


def run_one(program, mode: str, row: dict) -> dict:
    """Ask ``program`` one question; never raises (an exception becomes the ``error`` field).

    Returns:
        A dict with the keys ``CSV_COLUMNS``; numeric costs are None after an error.
    """
    out = {"id": row["id"], "question": row["question"], "relation": row["relation"], "mode": mode,
           "answer": "", "correct": False, "action": "", "expected_action": row["expected_action"] or "",
           "confidence": None, "fallback": False, "escalated": False, "lm_calls": None, "prompt_tokens": None,
           "completion_tokens": None, "seconds": None, "error": "", "gold": json.dumps(row["gold"])}
    t0 = time.perf_counter()
    try:
        res = program(question=row["question"])
        action = getattr(res, "action", None)
        trace = getattr(res, "trace", None)
        out.update(
            answer=str(getattr(res, "answer", "") or ""),
            action=(getattr(action, "value", action) or "") if action is not None else "",
            confidence=getattr(res, "confidence", None),
            fallback=bool(getattr(res, "fallback", False)),
            escalated=bool(getattr(res, "escalated", False)),
            lm_calls=getattr(trace, "lm_calls", None),
            prompt_tokens=getattr(trace, "prompt_tokens", None),
            completion_tokens=getattr(trace, "completion_tokens", None),
        )
        out["correct"] = is_correct(row, out["answer"], out["fallback"])
    except Exception as exc:  # noqa: BLE001 - one bad question must not stop the run
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["seconds"] = round(time.perf_counter() - t0, 3)
    return out


def summarize(results: list[dict], with_expected: bool = False) -> dict:
    """Figures for one mode's result rows (keys as in the module docstring; % in [0, 100])."""
    n = len(results)
    ok = [r for r in results if not r["error"]]
    graded = [r for r in ok if r["action"]]
    actions = {a: sum(1 for r in graded if r["action"] == a) for a in ACTIONS} if graded else None
    tokens = [(r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0) for r in ok
              if r["prompt_tokens"] is not None or r["completion_tokens"] is not None]
    acc = rate(r["correct"] for r in results)
    fb = rate(r["fallback"] for r in ok)
    esc = rate(r.get("escalated", False) for r in graded)
    s = {
        "n": n, "errors": n - len(ok),
        "accuracy": None if acc is None else round(100 * acc, 1),
        "actions": actions,
        "fallback_rate": None if fb is None else round(100 * fb, 1),
        "escalation_rate": None if esc is None else round(100 * esc, 1),
        "median_lm_calls": median(r["lm_calls"] for r in ok),
        "median_tokens": median(tokens),
        "median_seconds": median(r["seconds"] for r in ok),
    }
    if with_expected:
        pairs = [r for r in graded if r["expected_action"]]
        aa = rate(r["action"] == r["expected_action"] for r in pairs)
        s["action_accuracy"] = None if aa is None or not pairs else round(100 * aa, 1)
    return s


def markdown_table(summary: dict[str, dict]) -> str:
    """A Markdown pipe table, one row per mode (no ``tabulate`` dependency)."""
    def fmt(v, suffix=""):
        return "-" if v is None else (f"{v:g}{suffix}" if isinstance(v, float) else f"{v}{suffix}")

    with_aa = any("action_accuracy" in s for s in summary.values())
    head = ["mode", "n", "errors", "accuracy", "actions c/a/i", "fallback", "escalated", "med LM calls",
            "med tokens", "med s/question"] + (["action acc."] if with_aa else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    for mode, s in summary.items():
        if "build_error" in s:
            lines.append(f"| {mode} | build failed: {s['build_error']} |")
            continue
        acts = "/".join(str(s["actions"][a]) for a in ACTIONS) if s["actions"] else "-"
        cells = [mode, fmt(s["n"]), fmt(s["errors"]), fmt(s["accuracy"], " %"), acts,
                 fmt(s["fallback_rate"], " %"), fmt(s.get("escalation_rate"), " %"), fmt(s["median_lm_calls"]), fmt(s["median_tokens"]),
                 fmt(s["median_seconds"])] + ([fmt(s.get("action_accuracy"), " %")] if with_aa else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m optimize.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("--set", dest="set_name", default="popqa", help="popqa | adversarial")
    p.add_argument("--split", default="dev", choices=["train", "dev", "test"], help="adversarial split")
    p.add_argument("--limit", type=int, default=None, help="number of questions (seeded, spread over relations)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", default="closed,rag,crag", help="comma-separated: closed,rag,crag")
    p.add_argument("--model", default=None, help="embedded-1.5b (default), embedded-0.5b, or a DSPy model string")
    p.add_argument("--out", default=None, help="output folder (default results/<date>-<time>-<set>/)")
    p.add_argument("--no-cache", action="store_true",
                   help="disable DSPy's response cache (cached calls report 0 tokens and ~0 s)")
    p.add_argument("--compiled", default="compiled", help="compiled program folder; 'none' for uncompiled")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in ("closed", "rag", "crag")]
    if bad or not args.modes:
        p.error(f"unknown mode(s) {bad}; choose from closed, rag, crag")
    if args.limit is not None and args.limit <= 0:
        p.error("--limit must be positive")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; returns the exit code (see the module docstring)."""
    args = parse_args(argv)
    rows = load_set(args.set_name, args.limit, args.seed, args.split)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out_dir = Path(args.out or f"results/{stamp}-{args.set_name}")
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path = out_dir / "results.csv"

    from program.factory import build_program
    from program.lm import configure_lm

    lm = configure_lm(args.model)
    if args.no_cache:
        import dspy

        dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)
    # A SIGTERM (e.g. `timeout`) ends the run like Ctrl-C: the summary of what was done is written.
    try:
        old_term = signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread: leave signals alone
        old_term = None
    compiled = None if str(args.compiled).lower() in ("", "none") else args.compiled
    with_expected = args.set_name == "adversarial"
    knowledge_base = None  # the default: the PopQA knowledge base
    if with_expected:  # the adversarial queries are asked of their own help-centre knowledge base
        from eval_sets.adversarial import KB_DIR
        from program.resources import knowledge_base as build_kb

        knowledge_base = build_kb(KB_DIR)
    summary: dict[str, dict] = {}
    code = 0
    new_file = not csv_path.exists() or csv_path.stat().st_size == 0
    with open(csv_path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_COLUMNS)
        if new_file:
            writer.writeheader()
            fh.flush()
        try:
            for mode in args.modes:
                try:
                    program = build_program(mode, compiled_dir=compiled, knowledge_base=knowledge_base)
                except Exception as exc:  # noqa: BLE001
                    print(f"error: building mode {mode!r} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
                    summary[mode] = {"build_error": f"{type(exc).__name__}: {exc}"}
                    code = 1
                    continue
                results: list[dict] = []
                summary[mode] = summarize(results, with_expected)
                for row in tqdm(rows, desc=mode, unit="q", file=sys.stderr):
                    r = run_one(program, mode, row)
                    writer.writerow(r)
                    fh.flush()
                    results.append(r)
                    summary[mode] = summarize(results, with_expected)
        except KeyboardInterrupt:
            print("interrupted: writing the summary of what was done", file=sys.stderr)
            code = 130
    if old_term is not None:
        signal.signal(signal.SIGTERM, old_term)
    meta = {"set": args.set_name, "split": args.split if with_expected else None, "limit": args.limit,
            "seed": args.seed, "model": args.model or getattr(lm, "model", None), "compiled": compiled,
            "cache": not args.no_cache, "n_questions": len(rows), "csv": str(csv_path), "modes": summary}
    (out_dir / "summary.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    print(f"\n## {args.set_name} ({len(rows)} questions, model {meta['model']}, seed {args.seed})\n")
    print(markdown_table(summary))
    print(f"\nrows: {csv_path}\nsummary: {out_dir / 'summary.json'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
