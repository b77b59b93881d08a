"""Summaries of an evaluation run, read back from its CSVs, and their Markdown tables.

Rates are percentages in [0, 100] rounded to 0.1; None where undefined (no question to
count). Costs are per question: medians and 90th percentiles (linear interpolation).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from optimize.eval_data import abstained
from optimize.metrics import median, percentile
from optimize.record import CSV_COLUMNS, STEP_COLUMNS
from optimize.selective import COVERAGES, selective_figures, truthfulness

ACTIONS = ("correct", "ambiguous", "incorrect")
CONFIDENT_MODES = {"rag", "crag", "self-crag"}  # the modes whose confidence scores their answer
_BOOL = ("correct", "fallback", "answerable", "abstained")  # candidate_correct stays text
_NUM = ("confidence", "lm_calls", "prompt_tokens", "completion_tokens", "cached_tokens", "seconds", "claims",
        "claims_fully", "claims_partially", "groundedness", "check_lm_calls", "check_prompt_tokens",
        "check_completion_tokens", "check_seconds", "citation_recall", "citation_precision", "unsupported_sentences")
_COST = ("lm_calls", "prompt_tokens", "completion_tokens", "tokens", "seconds")


def read_results(path: str | Path) -> pd.DataFrame:
    """``results.csv`` as a DataFrame, one row per (mode, id): the last row wins (a resumed run
    may have re-asked a question that failed). Booleans are bool, numbers float (NaN when
    empty), text str; columns missing from an older file are added empty. ``retrieval_skipped``
    stays text: ``True``/``False`` where the retrieval decider ran, empty where it did not."""
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    for col in CSV_COLUMNS:
        if col not in df:
            df[col] = ""
    # Empty in an older file: its questions were all answerable (PopQA); abstention follows from the answer.
    answerable = df["answerable"].ne("False")
    needs_retrieval = df["needs_retrieval"].ne("False")  # empty: an older file, no chit-chat labels
    derived = [abstained(a, f == "True") for a, f in zip(df["answer"], df["fallback"])]
    missing = df["abstained"].eq("")
    for col in _BOOL:
        df[col] = df[col].eq("True")
    df["answerable"] = answerable
    df["needs_retrieval"] = needs_retrieval
    df.loc[missing, "abstained"] = pd.Series(derived, index=df.index, dtype=bool)[missing]
    for col in _NUM:
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df.drop_duplicates(["mode", "id"], keep="last").reset_index(drop=True)


def read_steps(path: str | Path) -> pd.DataFrame:
    """``steps.csv`` as a DataFrame (numbers float), one row per (mode, id, step_index), last wins;
    an empty frame with ``STEP_COLUMNS`` when the file does not exist."""
    if not Path(path).exists():
        return pd.DataFrame(columns=STEP_COLUMNS)
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    if "cached_tokens" not in df:  # an older run: the cache was not counted
        df["cached_tokens"] = ""
    for col in ("step_index", "lm_calls", "prompt_tokens", "completion_tokens", "cached_tokens", "seconds"):
        df[col] = pd.to_numeric(df[col], errors="coerce")
    return df.drop_duplicates(["mode", "id", "step_index"], keep="last").reset_index(drop=True)


def only_pairs(df: pd.DataFrame, pairs: set[tuple[str, str]]) -> pd.DataFrame:
    """The rows of ``df`` whose (mode, id) is in ``pairs``."""
    keep = [p in pairs for p in zip(df["mode"], df["id"])]
    return df.loc[pd.Series(keep, index=df.index, dtype=bool)]


def _pct(flags: pd.Series) -> float | None:
    return None if flags.empty else round(100 * float(flags.mean()), 1)


def _clean(v):
    """A plain, JSON-ready number: int when integral, else float; None for NaN."""
    if v is None or pd.isna(v):
        return None
    v = float(v)
    return int(v) if v.is_integer() else round(v, 3)


def summarize(df: pd.DataFrame, steps: pd.DataFrame | None = None, with_expected: bool = False) -> dict:
    """Figures for one mode's rows (``read_results``) and step rows (``read_steps``).

    Returns:
        ``n``, ``errors``, ``accuracy`` (errors count as wrong), ``actions`` (counts, or None
        without an evaluator), ``correction_rate`` (graded questions routed to incorrect or
        ambiguous), ``outcomes`` (how the questions ended: ``program.types.Ending`` value ->
        count; empty for runs older than the field), ``fallback_rate``,
        ``abstention_answerable`` / ``abstention_unanswerable`` (None without such rows),
        ``groundedness`` / ``groundedness_partial`` (share of the claims of non-abstaining answers
        fully / partially supported; None without), ``claims_checked``, ``grounded_by``,
        ``cited_share`` (answers that state something, neither the fallback nor an abstention,
        with at least one citation), ``citation_recall`` / ``citation_precision`` (ALCE's,
        mean over those answers; ``program.stages.attribution.citation_quality``), None without them,
        ``truthfulness`` (the CRAG benchmark's score in points), ``confidence_auroc`` and
        ``risk_coverage`` (``optimize.selective``; None for modes without an answer confidence),
        ``answerable_right`` and ``unanswerable_declined`` (counts),
        ``accuracy_by_relation`` (PopQA relation or adversarial category -> accuracy),
        ``median_*`` and ``p90_*`` of ``lm_calls``, ``prompt_tokens``, ``completion_tokens``,
        ``tokens`` and ``seconds`` per question, ``check_lm_calls`` / ``check_seconds``
        (totals of the post-hoc check, outside the mode's cost), ``steps`` (per step: ``ran``
        = questions it ran for, ``mean_lm_calls``, ``mean_prompt_tokens``,
        ``mean_completion_tokens``, ``mean_seconds`` per answered question; ``_step_medians``),
        ``median_cached_tokens`` (prompt tokens the LM's cache served; None in older runs), and with
        ``with_expected`` ``action_accuracy`` and ``confusion`` ({expected: {predicted: count}}
        over graded rows with a label). A question the retrieval decider answered without
        retrieval has no action, so it is outside ``actions``, the correction rate,
        ``action_accuracy`` and ``confusion``.

        The retrieval decider (``--decide-retrieval``): ``skip_rate`` (questions it ran for that
        skipped retrieval), ``decision_accuracy`` (its decisions that match the rows'
        ``needs_retrieval`` label) and ``skipped_needing_retrieval`` (a count: the harmful
        skips), all None where it never ran; and for every mode ``no_retrieval_questions``:
        ``n``, ``accuracy`` and ``median_lm_calls`` of the rows labeled ``needs_retrieval: false``
        (the adversarial set's chit-chat), None without such rows.
    """
    ok = df[df["error"] == ""]
    graded = ok[ok["action"] != ""]
    ok = ok.assign(tokens=ok["prompt_tokens"].fillna(0) + ok["completion_tokens"].fillna(0))
    ok.loc[ok["prompt_tokens"].isna() & ok["completion_tokens"].isna(), "tokens"] = float("nan")
    s = {
        "n": len(df), "errors": len(df) - len(ok),
        "accuracy": _pct(df["correct"]),
        "actions": {a: int((graded["action"] == a).sum()) for a in ACTIONS} if len(graded) else None,
        "correction_rate": _pct(graded["action"].isin(["incorrect", "ambiguous"])),
        "outcomes": {k: int(v) for k, v in ok.loc[ok["outcome"] != "", "outcome"].value_counts().items()},
        "fallback_rate": _pct(ok["fallback"]),
        "abstention_answerable": _pct(ok.loc[ok["answerable"], "abstained"]),
        "abstention_unanswerable": _pct(ok.loc[~ok["answerable"], "abstained"]),
        **_groundedness_figures(ok),
        **_citation_figures(ok),
        **_cost_figures(ok),
    }
    s.update(_answer_figures(df))
    s["accuracy_by_relation"] = {str(r): _pct(rows["correct"]) for r, rows in df.groupby("relation")}
    s["steps"] = _steps(steps, len(ok)) if steps is not None else {}
    s.update(_retrieval_decisions(df, ok))
    if with_expected:
        s.update(_expected_figures(graded))
    return s


def _answer_figures(df: pd.DataFrame) -> dict:
    """Truthfulness, the confidence's figures (modes with a confidence), the drafts scored as
    answers, and the answerable right / unanswerable declined counts."""
    confident = CONFIDENT_MODES & set(df["mode"])
    s = selective_figures(df) if confident else {"truthfulness": truthfulness(df), "confidence_auroc": None,
                                                 "risk_coverage": None}
    s["draft"] = draft_figures(df)
    s["answerable_right"] = int((df["answerable"] & df["correct"]).sum())
    s["unanswerable_declined"] = int((~df["answerable"] & df["abstained"]).sum())
    return s


def draft_figures(df: pd.DataFrame) -> dict | None:
    """The reader's drafts of a ``crag`` / ``self-crag`` run scored as answers: plain RAG's one
    call over (nearly) the same passages, in the same run. ``accuracy``, ``truthfulness``,
    ``answerable_right`` and ``unanswerable_declined``; None where the rows have no drafts."""
    rows = df[df["draft_correct"].astype(str).isin(["True", "False"])] if "draft_correct" in df else df.iloc[:0]
    if rows.empty:
        return None
    from optimize.eval_data import abstained as said_no

    right = rows["draft_correct"].astype(str).eq("True")
    declined = pd.Series([said_no(d, False) for d in rows["draft"]], index=rows.index, dtype=bool)
    as_answers = pd.DataFrame({"correct": right, "abstained": declined, "answerable": rows["answerable"]})
    return {"n": len(rows), "accuracy": _pct(right), "truthfulness": truthfulness(as_answers),
            "answerable_right": int((rows["answerable"] & right).sum()),
            "unanswerable_declined": int((~rows["answerable"] & declined).sum())}


def _groundedness_figures(ok: pd.DataFrame) -> dict:
    """``groundedness`` / ``groundedness_partial`` (% of claims), ``claims_checked`` and ``grounded_by``."""
    claimed = ok[ok["claims"].fillna(0) > 0]
    n_claims = claimed["claims"].sum()
    by = sorted(set(claimed["grounded_by"]) - {""})
    return {
        "groundedness": round(100 * claimed["claims_fully"].sum() / n_claims, 1) if n_claims else None,
        "groundedness_partial": round(100 * claimed["claims_partially"].sum() / n_claims, 1) if n_claims else None,
        "claims_checked": int(n_claims),
        "grounded_by": "+".join(by) or None,
    }


def _cost_figures(ok: pd.DataFrame) -> dict:
    """``median_*`` and ``p90_*`` of each cost per question, and the post-hoc check's totals (None without it)."""
    s = {}
    for col in _COST:
        s[f"median_{col}"] = _clean(median(ok[col].tolist()))
        s[f"p90_{col}"] = _clean(percentile(ok[col].tolist(), 90))
    counted = ok["cached_tokens"].dropna().tolist()  # empty in runs from before the cache was counted
    s["median_cached_tokens"] = _clean(median(counted)) if counted else None
    s["check_lm_calls"] = _clean(ok["check_lm_calls"].sum()) if ok["check_lm_calls"].notna().any() else None
    s["check_seconds"] = _clean(ok["check_seconds"].sum()) if ok["check_seconds"].notna().any() else None
    return s


def _expected_figures(graded: pd.DataFrame) -> dict:
    """``action_accuracy`` (%) and ``confusion`` ({expected: {predicted: count}}) over the graded rows with a label."""
    labeled = graded[graded["expected_action"] != ""]
    return {
        "action_accuracy": _pct(labeled["action"] == labeled["expected_action"]),
        "confusion": {e: {p: int(((labeled["expected_action"] == e) & (labeled["action"] == p)).sum())
                          for p in ACTIONS} for e in ACTIONS} if len(labeled) else None,
    }


def _citation_figures(ok: pd.DataFrame) -> dict:
    # ALCE's figures over the answers that state something: not the fallback, not an abstention
    stated = ok[~ok["fallback"] & ~ok["abstained"] & ok["citation_recall"].notna()]
    with_citation = stated["citations"].str.len() > 2  # "[]" is no citation
    return {
        "cited_share": _pct(with_citation),
        "citation_recall": round(100 * float(stated["citation_recall"].mean()), 1) if len(stated) else None,
        "citation_precision": (round(100 * float(stated["citation_precision"].mean()), 1)
                               if stated["citation_precision"].notna().any() else None),
    }


def _retrieval_decisions(df: pd.DataFrame, ok: pd.DataFrame) -> dict:
    decided = ok[ok["retrieval_skipped"] != ""]
    skipped = decided["retrieval_skipped"] == "True"
    chat = df[~df["needs_retrieval"]]
    return {
        "skip_rate": _pct(skipped),
        "decision_accuracy": _pct(skipped != decided["needs_retrieval"]),
        "skipped_needing_retrieval": int((skipped & decided["needs_retrieval"]).sum()) if len(decided) else None,
        "no_retrieval_questions": {
            "n": len(chat), "accuracy": _pct(chat["correct"]),
            "median_lm_calls": _clean(median(chat.loc[chat["error"] == "", "lm_calls"].tolist())),
        } if len(chat) else None,
    }


def _steps(steps: pd.DataFrame, answered: int) -> dict:
    if steps.empty or not answered:
        return {}
    out = {}
    order = steps.groupby("step")["step_index"].mean().sort_values(kind="stable").index  # the flow's order
    for name in order:
        g = steps[steps["step"] == name]
        out[name] = {"ran": int(g["id"].nunique())}
        for col in ("lm_calls", "prompt_tokens", "completion_tokens", "seconds"):
            out[name][f"mean_{col}"] = round(float(g[col].sum()) / answered, 3)
        out[name].update(_step_medians(g))
    return out


def _step_medians(g: pd.DataFrame) -> dict:
    """One step's medians over the questions it ran for: ``median_seconds``, and where it made
    LM calls ``median_prompt_tokens`` (sent), ``median_cached_tokens`` (of those, served by the
    LM's prompt cache; None in runs that did not count them) and ``median_read_tokens`` (sent
    and not cached: what the LM read)."""
    per = g.groupby("id")[["lm_calls", "prompt_tokens", "cached_tokens", "seconds"]].sum(min_count=1)
    out = {"median_seconds": _clean(median(per["seconds"].dropna().tolist()))}
    called = per[per["lm_calls"].fillna(0) > 0]
    if called.empty:
        return out
    out["median_prompt_tokens"] = _clean(median(called["prompt_tokens"].dropna().tolist()))
    cached = called["cached_tokens"].dropna()
    out["median_cached_tokens"] = _clean(median(cached.tolist())) if len(cached) else None
    read = (called["prompt_tokens"] - called["cached_tokens"]).dropna()
    out["median_read_tokens"] = _clean(median(read.tolist())) if len(read) else None
    return out


def summarize_run(results: pd.DataFrame, steps: pd.DataFrame, with_expected: bool = False) -> dict[str, dict]:
    """``summarize`` per mode, in the order the modes first appear in ``results``."""
    return {mode: summarize(results[results["mode"] == mode], steps[steps["mode"] == mode], with_expected)
            for mode in results["mode"].unique()}


def _fmt(v, suffix: str = "") -> str:
    return "-" if v is None else (f"{v:g}{suffix}" if isinstance(v, float) else f"{v}{suffix}")


def _table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def _cited(s: dict) -> str:
    if s.get("cited_share") is None:
        return "-"
    return f"{_fmt(s['cited_share'], ' %')} ({_fmt(s['citation_recall'])} / {_fmt(s['citation_precision'])})"


def markdown_table(summary: dict[str, dict]) -> str:
    """A Markdown pipe table, one row per mode (no ``tabulate`` dependency)."""
    with_aa = any("action_accuracy" in s for s in summary.values())
    with_skips = any(s.get("skip_rate") is not None for s in summary.values())
    with_chat = any(s.get("no_retrieval_questions") for s in summary.values())
    head = ["mode", "n", "errors", "accuracy", "actions c/a/i", "correction", "fallback",
            "grounded (partly)", "cited (recall/precision)", "abstain ans./unans.", "med LM calls", "p90 LM calls",
            "med tokens",
            "med s/question", "p90 s/question"] + (["action acc."] if with_aa else []) \
        + (["retrieval skipped"] if with_skips else []) + (["no-retrieval q. acc. (med calls)"] if with_chat else [])
    rows = []
    for mode, s in summary.items():
        if "n" not in s:
            rows.append([mode, f"build failed: {s.get('build_error')}"])
            continue
        acts = "/".join(str(s["actions"][a]) for a in ACTIONS) if s["actions"] else "-"
        grounded = "-" if s["groundedness"] is None else \
            f"{_fmt(s['groundedness'], ' %')} ({_fmt(s['groundedness_partial'], ' %')})"
        rows.append([mode, _fmt(s["n"]), _fmt(s["errors"]), _fmt(s["accuracy"], " %"), acts,
                     _fmt(s["correction_rate"], " %"),
                     _fmt(s["fallback_rate"], " %"), grounded, _cited(s),
                     f"{_fmt(s['abstention_answerable'], ' %')} / {_fmt(s['abstention_unanswerable'], ' %')}",
                     _fmt(s["median_lm_calls"]), _fmt(s["p90_lm_calls"]), _fmt(s["median_tokens"]),
                     _fmt(s["median_seconds"]), _fmt(s["p90_seconds"])]
                    + ([_fmt(s.get("action_accuracy"), " %")] if with_aa else [])
                    + ([_fmt(s.get("skip_rate"), " %")] if with_skips else [])
                    + ([_chat(s.get("no_retrieval_questions"))] if with_chat else []))
    return _table(head, rows)


def selective_table(summary: dict[str, dict]) -> str:
    """Truthfulness, the confidence's AUROC and accuracy among answered at each coverage, a row
    per mode ("" when no mode has figures)."""
    modes = [m for m, s in summary.items() if s.get("truthfulness") is not None]
    if not modes:
        return ""
    head = ["mode", "accuracy", "truthfulness", "answerable right", "unanswerable declined", "confidence AUROC"] \
        + [f"acc. at {round(100 * c)} % answered" for c in COVERAGES]
    rows = []
    for m in modes:
        s, rc = summary[m], summary[m].get("risk_coverage") or {}
        rows.append([m, _fmt(s["accuracy"], " %"), _fmt(s["truthfulness"]), _fmt(s.get("answerable_right")),
                     _fmt(s.get("unanswerable_declined")), _fmt(s.get("confidence_auroc"))]
                    + [_fmt(rc.get(str(round(100 * c))), " %") for c in COVERAGES])
        d = s.get("draft")
        if d:
            rows.append([f"{m}'s draft (rag's call)", _fmt(d["accuracy"], " %"), _fmt(d["truthfulness"]),
                         _fmt(d["answerable_right"]), _fmt(d["unanswerable_declined"]), "-"]
                        + ["-" for _ in COVERAGES])
    return _table(head, rows)


def _chat(figures: dict | None) -> str:
    return "-" if not figures else f"{_fmt(figures['accuracy'], ' %')} ({_fmt(figures['median_lm_calls'])})"


def steps_table(summary: dict[str, dict], modes: tuple[str, ...] = ("crag", "self-crag", "langgraph")) -> str:
    """Mean cost per answered question, by step, for ``modes`` ("" when none has steps)."""
    rows = [[mode, name, str(c["ran"]), _fmt(c["mean_lm_calls"]), _fmt(c["mean_prompt_tokens"]),
             _fmt(c["mean_completion_tokens"]), _fmt(c["mean_seconds"])]
            for mode, s in summary.items() if mode in modes for name, c in (s.get("steps") or {}).items()]
    if not rows:
        return ""
    return _table(["mode", "step", "ran for", "mean LM calls", "mean prompt tok.", "mean completion tok.",
                   "mean s"], rows)


def confusion_table(mode: str, confusion: dict) -> str:
    """The evaluator's confusion matrix as Markdown: rows expected, columns predicted."""
    rows = [[e] + [str(confusion[e][p]) for p in ACTIONS] for e in ACTIONS]
    return f"evaluator confusion, {mode} (rows expected, columns predicted):\n\n" + \
        _table(["expected \\ predicted", *ACTIONS], rows)


def relation_table(summary: dict[str, dict]) -> str:
    """Accuracy per PopQA relation or adversarial category (rows) and mode (columns)."""
    modes = [m for m, s in summary.items() if s.get("accuracy_by_relation")]
    relations = sorted({r for m in modes for r in summary[m]["accuracy_by_relation"]})
    if not modes or len(relations) < 2:
        return ""
    return _table(["relation / category"] + modes,
                  [[r] + [_fmt(summary[m]["accuracy_by_relation"].get(r), " %") for m in modes] for r in relations])
