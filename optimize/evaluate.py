"""Metric-driven evaluation runs: the same questions and LM through several program modes.

Usage::

    python -m optimize.evaluate --set popqa [--split dev] --limit 50 --modes closed,rag,crag,self-crag \\
        [--model embedded-1.5b] [--seed 0] [--out DIR | --name NAME] [--resume] [--threads N] \\
        [--groundedness auto|off] [--compiled compiled] [--no-cache] [--decide-retrieval] \
        [--kb postgresql://user@host:5432/db?table=popqa]
    python -m optimize.evaluate --set adversarial --split dev --modes rag,crag,self-crag,langgraph
    python -m optimize.evaluate --kb docs/ --questions ours.csv --modes crag    # a team's own labeled questions

``--questions FILE`` (with ``--kb``, or ``$CRAG_KB``) asks a team's own labeled questions of its
own knowledge base instead of a built-in set: a JSONL or CSV file of ``question``, ``answers``
(gold strings; several allowed) and optional ``answerable`` (``optimize.user_questions``); a bad
row is one line naming the row and the field (exit 2). The run prints and writes what a built-in
set's does; the web defaults to none.

``--split`` picks the split of either set, ``dev`` by default: the PopQA questions come from
the fixed train/dev split of ``eval_sets/popqa/split.json`` (evaluate on ``dev``; ``train`` is
what judges and prompts learn from, for analyses only; PopQA has no ``test``), the adversarial
queries from their ``train`` / ``dev`` / ``test`` split. ``--limit`` samples within the split.

Modes: ``closed`` (no retrieval), ``rag`` (top-k passages, trusted), ``crag`` (evaluator,
actions, refinement, web), ``self-crag`` (crag plus the claim-level self-check), ``langgraph``
(the CRAG of LangGraph's tutorial, the popular baseline: a binary relevance grade per passage,
a rewritten web search when one fails, the same generator; its route is reported as action
correct or incorrect).
``--decide-retrieval`` puts Self-RAG's "retrieve or not" decision (``DecideRetrieval``) in
front of ``crag`` and ``self-crag``: questions it judges to need no sources are answered
closed-book; ``results.csv`` says so per question (``retrieval_skipped``) and the summary
gives the skip rate, the decisions' accuracy against the rows' ``needs_retrieval`` labels,
and (in every mode) the accuracy and median calls on the rows that need no retrieval.

Output folder (default ``results/<YYYY-MM-DD>-<HHMMSS>-<set>/``; ``--name`` replaces the part
after the date, ``--out`` the whole path):

* ``results.csv``: one row per (mode, question), appended and flushed row by row, so a run
  killed half way keeps what it did. Columns: ``optimize.record.CSV_COLUMNS``. ``seconds`` is
  the wall-clock time of the program call (float, s); ``error`` is ``"Type: message"`` when
  the program raised (the run goes on; such a row counts as not correct, its costs are empty).
  ``check_*`` hold the cost of the post-hoc groundedness check, outside the mode's cost.
* ``steps.csv``: one row per (mode, question, trace step): ``optimize.record.STEP_COLUMNS``.
* ``summary.json``: the run's settings and per mode the figures of
  :func:`optimize.report.summarize` (accuracy, correction, outcomes, fallback and
  abstention rates, groundedness, cost medians and 90th percentiles, per-step mean cost,
  and on the adversarial set the action accuracy and the evaluator's confusion matrix).
* ``accuracy_vs_cost.png``: accuracy against median LM calls and seconds, one point per mode.

``--resume`` (with ``--out`` or ``--name``) skips the (mode, id) pairs that already have an
error-free row in that folder's ``results.csv`` and summarises all its rows, old and new;
without it the summary covers this run's rows only. Correctness: see
:func:`optimize.eval_data.is_correct`.

Exit codes: 0 done, 1 a mode's program could not be built, 2 bad arguments or unsupported
set, 130 interrupted by Ctrl-C or SIGTERM (the summary of what was done is still written;
with ``--threads`` the questions in flight are not recorded).
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import csv
import datetime as _dt
import json
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from eval_sets.domains import DOMAINS
from optimize import report
from optimize.eval_data import (FOLLOWUP_FORMS, demo_questions, followup_rows, held_out, is_correct,  # noqa: F401
                                load_set, sample_part, stratified_sample)  # public here since the split
from optimize.plot import PLOT_FILE, plot_modes
from optimize.selective import plot_risk_coverage
from optimize.user_questions import QuestionsFileError, load_questions_file
from optimize.record import CSV_COLUMNS, POST_HOC_MODES, STEP_COLUMNS, claim_checker, run_one
from program.lm.options import add_lm_options, lm_from

MODES = ("closed", "rag", "crag", "self-crag", "langgraph")  # as program.app.factory.MODES
ACTIONS = report.ACTIONS


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m optimize.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("--set", dest="set_name", default="popqa", help="popqa|adversarial|kubernetes|handbook|owasp")
    p.add_argument("--split", default="dev", choices=["train", "dev", "test"],
                   help="split of either set (default dev); PopQA has train and dev only (eval_sets/popqa/split.json)")
    p.add_argument("--limit", type=int, default=None, help="number of questions (seeded, spread over relations)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample", choices=("choose", "confirm"), help="the split's part (docs/evaluation.md)")
    p.add_argument("--followups", choices=FOLLOWUP_FORMS,
                   help="the domain's follow-ups: 'asked' (the last message, its conversation before it) or "
                        "'standalone' (the question written by hand); eval_sets/followups")
    p.add_argument("--modes", default="closed,rag,crag", help=f"comma-separated: {','.join(MODES)}")
    add_lm_options(p)
    p.add_argument("--out", default=None, help="output folder (default results/<date>-<time>-<set>/)")
    p.add_argument("--name", default=None, help="run name: the folder is results/<date>-<name>/")
    p.add_argument("--resume", action="store_true", help="skip questions already done in --out/--name")
    p.add_argument("--threads", type=int, default=1,
                   help="questions asked in parallel (remote LMs; the embedded model runs one at a time)")
    p.add_argument("--groundedness", default="auto", choices=["auto", "off"],
                   help="auto: check rag/crag/langgraph answers' claims after the fact (outside their cost); off: skip")
    p.add_argument("--compiled", default="compiled", help="compiled program folder; 'none' for uncompiled")
    p.add_argument("--web", default=None,
                   help="web backend of crag, self-crag and langgraph: snapshot (offline; the default for popqa), "
                        "none (the default for the labeled domains, private knowledge bases), ...")
    p.add_argument("--accept", type=float, default=None,
                   help="crag's operating point in [0, 1] instead of the compiled one (0 accepts every "
                        "draft: one LM call a question, as when collecting the confidence model's rows)")
    p.add_argument("--verify-band", type=float, default=None,
                   help="crag checks the claims of an answer whose confidence is less than this above "
                        "its operating point, in [0, 1] (0: never; default: the program's)")
    p.add_argument("--confidence", default=None,
                   help="a confidence.json (optimize.train_confidence) instead of the compiled one: its model "
                        "and operating point, e.g. one fit with this set's domain left out")
    p.add_argument("--kb", default=None,
                   help="knowledge base to answer from instead of the set's own: a corpus folder or a pgvector "
                        "postgresql://user@host:port/db?table=NAME; env CRAG_KB")
    p.add_argument("--questions", metavar="FILE", help="your own labeled questions (JSONL or CSV: question, "
                                                        "answers, answerable) instead of --set; needs --kb")
    p.add_argument("--decide-retrieval", action="store_true",
                   help="crag and self-crag first decide whether a question needs retrieval at all")
    p.add_argument("--retrieval", default=None, choices=("hybrid", "dense", "lexical"),
                   help="search the knowledge base in this mode instead of its default (hybrid)")
    args = p.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bad = [m for m in args.modes if m not in MODES]
    if bad or not args.modes:
        p.error(f"unknown mode(s) {bad}; choose from {', '.join(MODES)}")
    if args.limit is not None and args.limit <= 0:
        p.error("--limit must be positive")
    if args.threads < 1:
        p.error("--threads must be at least 1")
    return _own_questions(p, _checked(p, args))


def _checked(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``args`` once the operating point, the claim-check band, the confidence file and the output
    folder make sense; else ``p.error`` (exit 2, one line)."""
    for flag, value in (("--accept", args.accept), ("--verify-band", args.verify_band)):
        if value is not None and not 0.0 <= value <= 1.0:
            p.error(f"{flag} must be in [0, 1], got {value}")
    if args.confidence and not Path(args.confidence).is_file():
        p.error(f"--confidence {args.confidence}: no such file")
    if args.out and args.name:
        p.error("give --out or --name, not both")
    if args.resume and not (args.out or args.name):
        p.error("--resume needs the folder to resume: --out DIR or --name NAME")
    return args


def _own_questions(p: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.Namespace:
    """``--questions`` needs ``--kb`` and names the run; a labeled domain, or a user's own
    questions, is a private knowledge base: no web unless asked."""
    if args.questions:
        if not (args.kb or os.environ.get("CRAG_KB")):
            p.error("--questions needs the knowledge base they are asked of: --kb PATH (or CRAG_KB)")
        args.set_name = Path(args.questions).stem
    if args.web is None:
        args.web = "snapshot" if args.set_name == "popqa" and not args.questions else "none"
    return args


class SearchMode:
    """A knowledge base searched in one mode (``--retrieval``: ``hybrid``, ``dense`` or
    ``lexical``, ``program.retrieval.fusion.MODES``); every other attribute is its own."""

    def __init__(self, knowledge_base, mode: str):
        self._kb, self.mode = knowledge_base, mode

    def search(self, query: str, k: int = 3):
        return self._kb.search(query, k, mode=self.mode)

    def search_batch(self, queries: list[str], k: int = 3):
        return self._kb.search_batch(queries, k, mode=self.mode)

    def __len__(self) -> int:
        return len(self._kb)

    def __getattr__(self, name):
        return getattr(self._kb, name)


def out_folder(args: argparse.Namespace, now: _dt.datetime | None = None) -> Path:
    """``--out``, else ``results/<YYYY-MM-DD>-<run name>``, the run name ``--name`` or ``<HHMMSS>-<set>``."""
    if args.out:
        return Path(args.out)
    now = now or _dt.datetime.now()
    return Path("results") / f"{now:%Y-%m-%d}-{args.name or f'{now:%H%M%S}-{args.set_name}'}"


def _open_csv(path: Path, columns: list[str]):
    """Open ``path`` for appending rows of ``columns``; a file with other columns (an older run)
    is first rewritten with ``columns``, its missing cells empty. Returns ``(file, writer)``."""
    if path.exists() and path.stat().st_size:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            old = list(reader) if reader.fieldnames != columns else None
        if old is not None:
            with open(path, "w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=columns, restval="", extrasaction="ignore")
                w.writeheader()
                w.writerows(old)
    fh = open(path, "a", newline="", encoding="utf-8")  # closed by the caller
    writer = csv.DictWriter(fh, fieldnames=columns, extrasaction="ignore")
    if fh.tell() == 0:
        writer.writeheader()
        fh.flush()
    return fh, writer


def done_pairs(csv_path: Path) -> set[tuple[str, str]]:
    """The (mode, id) pairs of ``csv_path`` with an error-free row (empty set without the file)."""
    if not csv_path.exists():
        return set()
    with open(csv_path, newline="", encoding="utf-8") as fh:
        return {(r["mode"], r["id"]) for r in csv.DictReader(fh) if not r.get("error")}


def ask_all(program, mode: str, rows: list[dict], checker, threads: int, on_done) -> None:
    """Ask every row; call ``on_done((result_row, step_rows))`` in the calling thread as each ends.

    Each question runs on its own copy of DSPy's current LM (``lm.copy()``: shared client and
    cache, own ``history``), so the per-step cost accounting of concurrent questions does not
    mix. With ``threads > 1`` questions run in a thread pool, each in a copy of the caller's
    ``contextvars`` context so that ``dspy.context`` settings reach the workers.
    """
    import dspy

    lm = dspy.settings.lm

    def ask(row):
        own = dspy.context(lm=lm.copy()) if hasattr(lm, "copy") else contextlib.nullcontext()
        with own:
            return run_one(program, mode, row, checker)

    if threads <= 1:
        for row in rows:
            on_done(ask(row))
        return
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"eval-{mode}")
    try:
        futures = [pool.submit(contextvars.copy_context().run, ask, row) for row in rows]
        for future in as_completed(futures):
            on_done(future.result())
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@dataclass
class _Run:
    """What the modes' loop did: pairs asked, rows skipped, build errors, judges per mode, exit code (0, 1 or 130)."""

    asked: set[tuple[str, str]] = field(default_factory=set)
    skipped: int = 0
    build_errors: dict[str, str] = field(default_factory=dict)
    judges_by_mode: dict[str, dict] = field(default_factory=dict)
    code: int = 0


def _threads(threads: int, lm) -> int:
    """Questions asked in parallel: ``--threads``, or 1 for the embedded model (with a note)."""
    if threads > 1 and str(getattr(lm, "model", "") or "").startswith("local/"):
        print("note: the embedded model answers one call at a time in this process; --threads set to 1",
              file=sys.stderr)
        threads = 1
    return threads


def _sigterm_as_interrupt():
    """The SIGTERM handler replaced by Ctrl-C's, to restore after the run; None off the main thread."""
    # A SIGTERM (e.g. `timeout`) ends the run like Ctrl-C: the summary of what was done is written.
    try:
        return signal.signal(signal.SIGTERM, signal.default_int_handler)
    except ValueError:  # not the main thread: leave signals alone
        return None


def _build_mode(mode: str, build_program, args: argparse.Namespace, compiled, knowledge_base, run: _Run):
    """``(program, claim checker or None)`` for ``mode``; None when building failed (recorded in ``run``, code 1)."""
    try:
        settings = {} if args.accept is None else {"accept": args.accept}
        if args.verify_band is not None:
            settings["verify_band"] = args.verify_band
        if args.confidence:
            from program.app.compiled import read_confidence_file

            model, accept = read_confidence_file(args.confidence)
            settings = {"confidence": model, "accept": accept, **settings}
        program = build_program(mode, compiled_dir=compiled, knowledge_base=knowledge_base,
                                decide_retrieval=args.decide_retrieval, web=args.web, **settings)
    except Exception as exc:  # a failed picture must not lose the summary
        print(f"error: building mode {mode!r} failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        run.build_errors[mode] = f"{type(exc).__name__}: {exc}"
        run.code = 1
        return None
    if hasattr(program, "judges_report"):  # who judged, and whether adapted to this knowledge base
        run.judges_by_mode[mode] = program.judges_report()
    check = args.groundedness == "auto" and mode in POST_HOC_MODES
    return program, (claim_checker(program, compiled) if check else None)


def _ask_modes(args: argparse.Namespace, rows: list[dict], build_program, knowledge_base, compiled,
               threads: int, csv_path: Path, steps_path: Path) -> _Run:
    """What asking each mode its rows not done did; rows go to the CSVs as they end (Ctrl-C or SIGTERM: code 130)."""
    old_term = _sigterm_as_interrupt()
    done = done_pairs(csv_path) if args.resume else set()
    run = _Run()
    fh, writer = _open_csv(csv_path, CSV_COLUMNS)
    sfh, steps_writer = _open_csv(steps_path, STEP_COLUMNS)

    def record(item):
        result, steps = item
        steps_writer.writerows(steps)
        sfh.flush()
        writer.writerow(result)
        fh.flush()
        run.asked.add((result["mode"], result["id"]))
        bar.update(1)

    bar = None
    try:
        for mode in args.modes:
            todo = [r for r in rows if (mode, r["id"]) not in done]
            run.skipped += len(rows) - len(todo)
            if not todo:
                continue
            built = _build_mode(mode, build_program, args, compiled, knowledge_base, run)
            if built is None:
                continue
            program, checker = built
            bar = tqdm(total=len(todo), desc=mode, unit="q", file=sys.stderr)
            try:
                ask_all(program, mode, todo, checker, threads, record)
            finally:
                bar.close()
    except KeyboardInterrupt:
        print("interrupted: writing the summary of what was done", file=sys.stderr)
        run.code = 130
    finally:
        fh.close()
        sfh.close()
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    return run


def _summary(args: argparse.Namespace, run: _Run, csv_path: Path, steps_path: Path) -> dict:
    """Mode -> its figures over this run's rows (all rows with ``--resume``), with any ``build_error``."""
    results, steps = report.read_results(csv_path), report.read_steps(steps_path)
    if not args.resume:  # this run's rows only
        results, steps = report.only_pairs(results, run.asked), report.only_pairs(steps, run.asked)
    summary = report.summarize_run(results, steps, args.set_name in DOMAINS and not args.questions)
    for mode, err in run.build_errors.items():
        summary.setdefault(mode, {})["build_error"] = err
    return summary


RISK_PLOT_FILE = "risk_coverage.png"


def _risk_plot(csv_path: Path, path: Path, title: str) -> Path | None:
    """The risk-coverage plot's path, or None when no mode has a confidence or drawing failed."""
    try:
        return plot_risk_coverage(report.read_results(csv_path), path, title)
    except Exception as exc:  # a failed picture must not lose the summary
        print(f"warning: the risk-coverage plot failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _plot(summary: dict, path: Path, title: str) -> Path | None:
    """The accuracy-vs-cost plot's path, or None when drawing it failed (a warning printed)."""
    try:
        return plot_modes(summary, path, title)
    except Exception as exc:  # a failed picture must not lose the summary
        print(f"warning: the plot failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None


def _print_report(args: argparse.Namespace, n_questions: int, model, summary: dict, plot,
                  csv_path: Path, steps_path: Path, out_dir: Path) -> None:
    """Print the run's tables (modes, confusion matrices, by relation, cost per step) and its files."""
    print(f"\n## {args.set_name} ({n_questions} questions, model {model}, seed {args.seed})\n")
    print(report.markdown_table(summary))
    selective = report.selective_table(summary)
    if selective:
        print("\nselective answering (truthfulness: right +1, I don't know 0, wrong -1):\n\n" + selective)
    for mode, s in summary.items():
        if s.get("confusion"):
            print("\n" + report.confusion_table(mode, s["confusion"]))
    by_relation = report.relation_table(summary)
    if by_relation:
        print("\naccuracy by relation / category:\n\n" + by_relation)
    per_step = report.steps_table(summary)
    if per_step:
        print("\nmean cost per answered question, by step:\n\n" + per_step)
    print(f"\nrows: {csv_path}\nsteps: {steps_path}\nsummary: {out_dir / 'summary.json'}"
          + (f"\nplot: {plot}" if plot else ""))


def _rows(args: argparse.Namespace) -> list[dict] | None:
    """The questions to ask: the user's file (``--questions``; None after one error line), else the set's split."""
    if args.followups:
        return followup_rows(args.set_name, args.split, args.followups)
    if not args.questions:
        return load_set(args.set_name, args.limit, args.seed, args.split, args.sample)
    try:
        rows = load_questions_file(args.questions)
    except QuestionsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None
    rows = sample_part("questions", rows, args.sample, args.seed)
    return stratified_sample(rows, args.limit, args.seed) if args.limit else rows


def main(argv: list[str] | None = None) -> int:
    """Run the evaluation; returns the exit code (see the module docstring)."""
    args = parse_args(argv)
    rows = _rows(args)
    if rows is None:
        return 2
    out_dir = out_folder(args)
    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, steps_path = out_dir / "results.csv", out_dir / "steps.csv"

    from program.app.factory import build_program
    from program.app.flags import SetupError
    from program.app.resources import kb_location
    from program.app.resources import knowledge_base as open_kb
    from program.retrieval import CorpusError, KnowledgeBaseError

    knowledge_base = None  # the default: the PopQA knowledge base
    try:  # before loading the model: a wrong --kb fails fast, in one line
        if kb_location(args.kb):
            knowledge_base = open_kb(kb_location(args.kb))
            # as ask, serve and index: the files the knowledge base left out, one note each
            from program.app.startup import report_left_out

            report_left_out(kb_location(args.kb), knowledge_base)
        elif args.set_name in DOMAINS:  # a labeled domain is asked of its own knowledge base
            knowledge_base = open_kb(DOMAINS[args.set_name].kb_dir)
    except (CorpusError, KnowledgeBaseError, SetupError, ValueError) as exc:  # SetupError: an empty --kb or CRAG_KB
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.retrieval:
        knowledge_base = SearchMode(knowledge_base if knowledge_base is not None else open_kb(), args.retrieval)
    lm = lm_from(args)
    threads = _threads(args.threads, lm)
    compiled = None if str(args.compiled).lower() in ("", "none") else args.compiled
    rows, demos = held_out(rows, demo_questions(compiled))
    for row in demos:  # its answer stands in the compiled prompt: not a measure of reading
        print(f"note: left out {row['id']}: the compiled prompts hold it as a demo", file=sys.stderr)
    run = _ask_modes(args, rows, build_program, knowledge_base, compiled, threads, csv_path, steps_path)

    summary = _summary(args, run, csv_path, steps_path)
    model = args.model or getattr(lm, "model", None)
    plot = _plot(summary, out_dir / PLOT_FILE, f"{args.set_name}, {len(rows)} questions, {model}")
    _risk_plot(csv_path, out_dir / RISK_PLOT_FILE, f"{args.set_name} {args.split}, {len(rows)} questions, {model}")
    meta = {"set": args.set_name, "questions": args.questions, "split": None if args.questions else args.split,
            "limit": args.limit,
            "seed": args.seed, "sample": args.sample, "model": model, "compiled": compiled, "cache": not args.no_cache,
            "groundedness": args.groundedness, "decide_retrieval": args.decide_retrieval, "web": args.web,
            "threads": threads,
            "retrieval": args.retrieval or "hybrid", "verify_band": args.verify_band,
            "resume": args.resume, "skipped": run.skipped, "left_out_as_demos": [r["id"] for r in demos],
            "n_questions": len(rows), "judges": run.judges_by_mode, "csv": str(csv_path), "steps_csv": str(steps_path),
            "plot": str(plot) if plot else None, "modes": summary}
    (out_dir / "summary.json").write_text(json.dumps(meta, indent=2, default=str), encoding="utf-8")
    _print_report(args, len(rows), model, summary, plot, csv_path, steps_path, out_dir)
    return run.code


if __name__ == "__main__":
    sys.exit(main())
