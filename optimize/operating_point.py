"""Set a knowledge base's operating point from a team's own labeled questions, and show the trade.

Usage::

    python -m optimize.operating_point --kb PATH --labels FILE [--accept X] [--compiled compiled] [--model M]

CRAG declines an answer whose confidence is below its operating point (``accept``). Which point
is right is the team's call: a higher one declines more of what the documents do not answer and
more right answers too. This drafts every row of FILE (``optimize.user_questions``: question,
answers, answerable; one LM call each, plain RAG's call), scores each draft as ``CRAG`` does
(``program.judges.operating_point.draft_confidence``), and prints, for the chosen point, its two
neighbours and the compile's own point: right answers kept (of the drafts that are right),
unanswerable questions declined, and truthfulness (right +1, declined 0, wrong -1; declining an
unanswerable question is right). The chosen point is ``--accept``, else the one of highest
truthfulness on the rows (ties: the lower, which keeps more answers). It is saved as the
knowledge base's ``<compiled>/adapted/<corpus key>/operating_point.json``, which ``ask``,
``serve`` and ``load_compiled`` use from then on (``ask`` names it and where it came from).

The rows set the point, so figures measured on them are tuned to them: measure it on other
questions (``python -m optimize.evaluate --kb PATH --questions OTHER``).

Exit codes: 0 saved, 2 a bad flag, file or row (one line), or too few rows.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from optimize.metrics import answer_correct
from optimize.user_questions import QuestionsFileError, load_questions_file
from program.lm.options import add_lm_options, lm_from

MIN_ROWS = 10


@dataclass(frozen=True)
class Labeled:
    """One row's draft: its confidence, whether it abstained, whether it is right, and the row's kind."""

    confidence: float
    abstained: bool
    right: bool
    answerable: bool


@dataclass(frozen=True)
class Trade:
    """What an operating point does on the labeled rows.

    Attributes:
        accept: the point, in [0, 1].
        kept: right drafts answered (at or above ``accept``); ``right``: right drafts in all.
        declined: unanswerable rows declined (below ``accept``, or the draft abstained);
            ``unanswerable``: unanswerable rows in all.
        truthfulness: (right answers - wrong answers) / rows, in points (-100..100).
    """

    accept: float
    kept: int
    right: int
    declined: int
    unanswerable: int
    truthfulness: float

    def line(self, label: str) -> str:
        share = f"{self.kept / self.right:.0%}" if self.right else "-"
        unans = f"{self.declined / self.unanswerable:.0%}" if self.unanswerable else "-"
        return (f"| {label} | {self.accept:.4f} | {self.kept} of {self.right} ({share}) | "
                f"{self.declined} of {self.unanswerable} ({unans}) | {self.truthfulness:+.1f} |")


def trade_at(drafts: list[Labeled], accept: float) -> Trade:
    """The trade of ``accept`` on ``drafts``."""
    answered = [d for d in drafts if not d.abstained and d.confidence >= accept]
    right = sum(d.right for d in answered)
    wrong = len(answered) - right
    declined = sum(1 for d in drafts if not d.answerable and not (not d.abstained and d.confidence >= accept))
    score = 100.0 * (right + declined - wrong) / len(drafts) if drafts else 0.0
    return Trade(accept, right, sum(d.right for d in drafts), declined, sum(not d.answerable for d in drafts),
                 round(score, 1))


def candidates(drafts: list[Labeled]) -> list[float]:
    """Every point that changes a decision: 0 and each draft's confidence, ascending."""
    return sorted({0.0, *(round(d.confidence, 4) for d in drafts)})


def choose(drafts: list[Labeled], accept: float | None = None) -> tuple[Trade, Trade | None, Trade | None]:
    """``(chosen, lower neighbour, higher neighbour)``: ``accept`` when given, else the candidate of
    highest truthfulness (ties: the lower)."""
    points = candidates(drafts)
    if accept is None:
        accept = max(points, key=lambda p: (trade_at(drafts, p).truthfulness, -p))
    lower = max((p for p in points if p < accept), default=None)
    higher = min((p for p in points if p > accept), default=None)
    return (trade_at(drafts, accept), trade_at(drafts, lower) if lower is not None else None,
            trade_at(drafts, higher) if higher is not None else None)


def draft_rows(crag, rows: list[dict], progress: bool = True) -> list[Labeled]:
    """Draft each row once (plain RAG's call, scored as CRAG scores it)."""
    # lazy on purpose: the program loads only when drafting
    from program.judges.operating_point import draft_with_confidence

    out = []
    for row in tqdm(rows, desc="drafting the labeled questions", unit="q", file=sys.stderr, disable=not progress):
        answer, abstained, confidence = draft_with_confidence(crag, row["question"])
        right = row["answerable"] and not abstained and answer_correct(answer, row["gold"])
        out.append(Labeled(confidence, abstained, bool(right), row["answerable"]))
    return out


def print_trades(rows: list[dict], drafts: list[Labeled], accept: float | None, compiled_accept: float) -> Trade:
    """Print the chosen point, its neighbours and the compile's point as a Markdown table; the chosen one."""
    chosen, lower, higher = choose(drafts, accept)
    print(f"\n{len(rows)} labeled questions ({sum(r['answerable'] for r in rows)} answerable), "
          f"{sum(d.right for d in drafts)} drafts right\n")
    print("| point | accept | right answers kept | unanswerable declined | truthfulness |\n|---|---|---|---|---|")
    for label, trade in (("lower neighbour", lower), ("chosen", chosen), ("higher neighbour", higher),
                         ("before (compiled)", trade_at(drafts, compiled_accept))):
        if trade is not None:
            print(trade.line(label))
    return chosen


def _args(argv):
    p = argparse.ArgumentParser(prog="python -m optimize.operating_point", description=__doc__.split("\n")[0])
    p.add_argument("--kb", required=True, help="the knowledge base: a corpus folder or file (indexed as index does)")
    p.add_argument("--labels", required=True, metavar="FILE", help="your labeled questions: JSONL or CSV "
                                                                   "(question, answers, answerable)")
    p.add_argument("--accept", type=float, default=None, help="save this point instead of the best on the rows")
    p.add_argument("--compiled", default="compiled", help="the compiled program (default compiled/)")
    add_lm_options(p)
    args = p.parse_args(argv)
    if args.accept is not None and not 0.0 <= args.accept <= 1.0:
        p.error(f"--accept must be in [0, 1], got {args.accept}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    try:
        rows = load_questions_file(args.labels)
    except QuestionsFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if len(rows) < MIN_ROWS:
        print(f"error: {args.labels}: {len(rows)} rows; an operating point needs at least {MIN_ROWS}", file=sys.stderr)
        return 2
    # lazy on purpose: dspy, the model and the index load only after the file and flags are checked
    import dspy

    from program.app.configuration import load_compiled
    from program.app.resources import knowledge_base
    from program.judges.adapted import adapted_dir
    from program.judges.operating_point import OperatingPoint, save_operating_point
    from program.retrieval import CorpusError, KnowledgeBaseError

    try:
        kb = knowledge_base(args.kb)
    except (CorpusError, KnowledgeBaseError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dspy.configure(lm=lm_from(args).copy(temperature=0.0))
    crag = load_compiled(args.compiled, knowledge_base=kb, web=None)
    drafts = draft_rows(crag, rows)
    chosen = print_trades(rows, drafts, args.accept, crag.settings.accept)
    where = adapted_dir(args.compiled, kb)
    if where is None:
        print("error: this knowledge base has no manifest to key its operating point by", file=sys.stderr)
        return 2
    answerable = [d for d in drafts if d.answerable]
    point = OperatingPoint(chosen.accept, round(sum(d.confidence < chosen.accept for d in answerable)
                                                / max(1, len(answerable)), 4),
                           len(answerable), chosen.unanswerable,
                           round(chosen.declined / chosen.unanswerable, 4) if chosen.unanswerable else 0.0,
                           source=f"labels {Path(args.labels).name} ({len(rows)} rows)")
    try:
        path = save_operating_point(point, where)
    except OSError as exc:
        print(f"error: cannot save the operating point into {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"\nsaved: accept {chosen.accept:.4f} for {args.kb} in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
