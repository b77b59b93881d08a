"""One question through one mode, recorded as a ``results.csv`` row and its ``steps.csv`` rows.

The mode's cost columns (``lm_calls``, ``prompt_tokens``, ``completion_tokens``, ``seconds``)
cover the program call only. Groundedness of ``rag``, ``crag`` and ``langgraph`` answers, modes
that do not check their claims, is measured after that call by a :class:`program.stages.selfcheck.ClaimChecker`
on the answer and the strips it had; that check's own cost goes to the ``check_*`` columns.
``self-crag`` is measured by its own final (kept) claims, at no extra cost. An answer written
closed-book because the retrieval decider skipped retrieval has no strips: like ``closed``
answers, it is not measured.

``retrieval_skipped`` is True or False when the program ran the retrieval decider
(``--decide-retrieval``: its trace has a ``decide-retrieval`` step), empty otherwise;
``needs_retrieval`` is the row's label (False only for chit-chat).

``citations`` holds the answer's citations (``[[n, label, strip text], ...]``; the label is the
source id, or for a PDF its file and page, ``report.pdf p. 14``: what a reader
checks a citation against), ``citation_recall`` and
``citation_precision`` ALCE's figures for the answer (Gao et al. 2023), judged by the support
judge that set them (``program.stages.attribution``), ``unsupported_sentences`` the sentences no strip
supports; all empty for the fallback, an abstention and closed-book answers.
"""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path

from optimize.eval_data import abstained, is_correct
from program.guards.cost import step
from program.stages.attribution import citation_quality
from program.stages.selfcheck import ClaimChecker
from program.types import Trace

CSV_COLUMNS = [
    "id", "question", "relation", "mode", "answer", "correct", "action", "expected_action",
    "confidence", "fallback", "retrieval_skipped", "lm_calls", "prompt_tokens", "completion_tokens",
    "cached_tokens", "seconds", "error", "gold",
    "answerable", "needs_retrieval", "abstained", "claims", "claims_fully", "claims_partially", "groundedness",
    "grounded_by",
    "check_lm_calls", "check_prompt_tokens", "check_completion_tokens", "check_seconds",
    "citations", "citation_recall", "citation_precision", "unsupported_sentences",
    "draft", "draft_correct", "draft_checks", "candidate_correct", "outcome", "reason", "standalone",
]
STEP_COLUMNS = ["id", "mode", "step_index", "step", "lm_calls", "prompt_tokens", "completion_tokens",
                "cached_tokens", "seconds", "notes"]
POST_HOC_MODES = ("rag", "crag", "langgraph")  # answers checked after the fact when --groundedness is on


def claim_checker(program, compiled_dir: str | Path | None):
    """The ClaimChecker for post-hoc groundedness: the program's own one when it has one
    (``crag`` mode: the compiled checker it does not run), else a new one carrying the
    compiled ``checker.*`` prompts of ``compiled_dir/crag.json`` and the compiled judges of
    ``compiled_dir/judges.json`` when those files exist, so every mode is checked alike."""
    own = getattr(program, "checker", None)
    if own is not None:
        return own
    state_file = Path(compiled_dir) / "crag.json" if compiled_dir else None
    if state_file is None or not state_file.exists():
        return ClaimChecker()
    from program.judges import load_judges

    checker = ClaimChecker(judges=load_judges(compiled_dir))  # the same support judge as self-crag's
    state = json.loads(state_file.read_text(encoding="utf-8"))
    for name, predictor in checker.named_predictors():
        if f"checker.{name}" in state:
            predictor.load_state(state[f"checker.{name}"])
    return checker


def _ask(program, row: dict):
    """``program``'s answer to ``row``; a conversation's follow-up (``row["history"]``) goes with its
    conversation to the programs that read one (crag, self-crag), the others get the question alone."""
    takes_history = row.get("history") and "history" in inspect.signature(type(program).forward).parameters
    return program(question=row["question"], **({"history": row["history"]} if takes_history else {}))


def run_one(program, mode: str, row: dict, checker=None) -> tuple[dict, list[dict]]:
    """Ask ``program`` one question; never raises (an exception becomes the ``error`` field).

    Args:
        program: a module whose ``(question=...)`` call returns a ``CRAGResult``.
        mode: ``closed``, ``rag``, ``crag``, ``self-crag`` or ``langgraph``.
        row: an evaluation row (:func:`optimize.eval_data.load_set`).
        checker: a ClaimChecker for post-hoc groundedness of ``POST_HOC_MODES`` answers, or None
            (no check: their groundedness columns stay empty).

    Returns:
        ``(result_row, step_rows)``: a dict with the keys ``CSV_COLUMNS`` (costs None after an
        error; ``seconds`` the wall-clock time of the program call in s) and one dict per
        trace step with the keys ``STEP_COLUMNS`` (none after an error).
    """
    out = {k: None for k in CSV_COLUMNS}
    out.update(id=row["id"], question=row["question"], relation=row["relation"], mode=mode, answer="",
               correct=False, action="", expected_action=row["expected_action"] or "", fallback=False,
               abstained=False, error="", grounded_by="", gold=json.dumps(row["gold"]),
               answerable=bool(row.get("answerable", True)), needs_retrieval=bool(row.get("needs_retrieval", True)),
               retrieval_skipped="")
    steps: list[dict] = []
    t0 = time.perf_counter()
    try:
        res = _ask(program, row)
    except Exception as exc:  # one bad question must not stop the run
        out["error"] = f"{type(exc).__name__}: {exc}"
        out["seconds"] = round(time.perf_counter() - t0, 3)
        return out, steps
    out["seconds"] = round(time.perf_counter() - t0, 3)
    action = getattr(res, "action", None)
    trace = getattr(res, "trace", None)
    out.update(
        answer=str(getattr(res, "answer", "") or ""),
        action=(getattr(action, "value", action) or "") if action is not None else "",
        confidence=getattr(res, "confidence", None),
        fallback=res.fallback, outcome=res.outcome.ending.value, reason=res.outcome.reason,
        standalone=str(getattr(res, "question", "")) if getattr(res, "asked", "") else "",  # a follow-up's rewrite
        lm_calls=getattr(trace, "lm_calls", None),
        prompt_tokens=getattr(trace, "prompt_tokens", None),
        completion_tokens=getattr(trace, "completion_tokens", None),
        cached_tokens=getattr(trace, "cached_tokens", None))
    if any(s.step == "decide-retrieval" for s in getattr(trace, "steps", None) or []):
        out["retrieval_skipped"] = bool(getattr(res, "retrieval_skipped", False))
    out["correct"] = is_correct(row, out["answer"], out["fallback"])
    out.update(_draft(row, res))
    # the answer the confidence is about: the one given, or the one declined (selective QA's view)
    declined = res.outcome.declined
    out["candidate_correct"] = is_correct(row, declined, False) if out["fallback"] and declined else out["correct"]
    out["abstained"] = abstained(out["answer"], out["fallback"])
    for i, s in enumerate(getattr(trace, "steps", None) or []):
        steps.append({"id": row["id"], "mode": mode, "step_index": i, "step": s.step, "lm_calls": s.lm_calls,
                      "prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens,
                      "cached_tokens": s.cached_tokens, "seconds": s.seconds, "notes": s.notes})
    out.update(_groundedness(mode, res, checker))
    out.update(_citations(res, getattr(getattr(program, "attributor", None), "judges", None)))
    return out, steps


def _draft(row: dict, res) -> dict:
    """The reader's draft (``crag``, ``self-crag``): its text, whether it was right as written
    (an answer to an unanswerable question is wrong; an abstention is right only there), and
    its checks as JSON; empty for modes without a draft."""
    draft = str(getattr(res, "draft", "") or "")
    checks = getattr(res, "draft_checks", None) or {}
    if not draft and not checks:
        return {"draft": "", "draft_correct": "", "draft_checks": ""}
    return {"draft": draft, "draft_correct": is_correct(row, draft, False), "draft_checks": json.dumps(checks)}


def _citations(res, judges) -> dict:
    """The answer's citations as JSON (``[[n, label, strip text], ...]``: ``Citation.label``) and ALCE's citation
    recall and
    precision (``program.stages.attribution.citation_quality``, by the support judge that cited);
    empty for the fallback, an abstention and closed-book answers (no sentences)."""
    sentences = list(getattr(res, "sentences", None) or [])
    if getattr(res, "fallback", False) or not sentences:
        return {}
    recall, precision = citation_quality(res.question, sentences, list(res.strips), judges)
    return {"citations": json.dumps([[c.number, c.label, c.text] for c in res.citations], ensure_ascii=False),
            "citation_recall": recall, "citation_precision": precision,
            "unsupported_sentences": sum(not s.supported for s in sentences)}


def _groundedness(mode: str, res, checker) -> dict:
    # Abstentions have no claims and closed-book answers no strips: nothing to measure.
    if mode == "closed" or res.fallback or getattr(res, "retrieval_skipped", False):
        return {}
    if mode == "self-crag":
        claims, by, cost = [c for c in res.claims if c.kept], "self-check", None
    elif checker is not None and mode in POST_HOC_MODES:
        trace = Trace()
        try:
            with step(trace, "groundedness-check"):
                claims = checker(question=res.question, answer=res.answer, strips=list(res.strips))
        except Exception as exc:  # a failed check leaves groundedness empty
            return {"grounded_by": f"check failed: {type(exc).__name__}: {exc}"}
        by, cost = "post-hoc", trace.steps[0]
    else:
        return {}
    fully = sum(1 for c in claims if c.support == "fully")
    partially = sum(1 for c in claims if c.support == "partially")
    out = {"claims": len(claims), "claims_fully": fully, "claims_partially": partially, "grounded_by": by,
           "groundedness": round(fully / len(claims), 4) if claims else None}
    if cost is not None:
        out.update(check_lm_calls=cost.lm_calls, check_prompt_tokens=cost.prompt_tokens,
                   check_completion_tokens=cost.completion_tokens, check_seconds=cost.seconds)
    return out
