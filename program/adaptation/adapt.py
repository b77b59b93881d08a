"""The judges adapted to one knowledge base from its own documents, with no hand labels (ARES §3).

``python -m program index PATH`` and ``python -m optimize.compile --kb PATH_OR_URL`` call
:func:`adapt_judges`. It fits the passage, strip and support judges (``program.adaptation.fit.fit_judges``)
on the labeled sources' pairs the compile saved (``program.adaptation.labeled``: PopQA's train split
and each training domain's) plus the rows the knowledge base gives of itself
(``program.adaptation.synthetic_rows.document_source``: heading questions and, with ``questions``,
questions the LM writes for sampled chunks, kept when retrieval ranks their source chunk first;
"not covered" twins; FILCO strips; MiniCheck support rows), and calibrates the evaluator's
thresholds on that knowledge base's own synthetic questions. The judges are kept with the
knowledge base (``program.judges.adapted.adapted_state``: the per-user state folder, or its
PostgreSQL database), which ``load_compiled`` reads whenever that version of it is in use.

A rerun is cheap: the judges are reused while the documents, the saved labeled pairs, the code and
the options are unchanged (``adapt_stamp``). After a change to a few files the rows of the others
are kept and the judges refit in seconds (``program.adaptation.own_rows``: past a quarter of the
chunks changed, every row is made again).

``leave_out`` drops labeled sources by name: measuring a domain with its labels left out
(``python -m optimize.compile --kb ... --leave-out kubernetes``) is how the end-to-end figures of
``docs/lab/2026-12-03-kubernetes-end-to-end.md`` are made.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

from tqdm import tqdm

from program.adaptation.fit import fit_judges
from program.adaptation.labeled import labeled_stamp, load_labeled
from program.adaptation.lm_questions import write_questions
from program.adaptation.own_rows import Refresh, own_rows, rows_key
from program.adaptation.synthetic_rows import heading_questions
from program.judges.adapted import adapted_state, load_adapted, write_judges
from program.judgments import PASSAGE, STRIP, SUPPORT, TRAINED
from program.judges.store import corpus_key
from program.retrieval.embedding import get_embedder
from program.retrieval.progress import progress_enabled

ROOT = Path(__file__).resolve().parents[2]  # the project: program/ is under it
# modules that use adapted judges and make no pairs: a change keeps the adapted judges
JUDGE_USERS = ("operating_point.py", "reader_demo.py", "adapted.py")
DEFAULT_QUESTIONS = 0
DEFAULT_TIME_CAP = 900.0
# A knowledge base with fewer heading questions than this adapts from questions the LM writes
# (ARES §3.1): AUTO_QUESTIONS of them, within AUTO_TIME_CAP seconds (about 14 s each with the
# embedded 1.5B model on 2 cores: about 9 minutes, fitting included under 15).
MIN_HEADING_QUESTIONS = 10
AUTO_QUESTIONS = 40
AUTO_TIME_CAP = 540.0
# The operating point (``program.judges.operating_point``) drafts this many of the kept written
# questions and their look-alikes, one generation each: the explicit ``--questions`` path takes
# DEFAULT_OPERATING_QUESTIONS without a cap; the documents' own choice AUTO_OPERATING_QUESTIONS
# within AUTO_OPERATING_TIME_CAP seconds, so that all of ``index`` stays under 15 minutes.
DEFAULT_OPERATING_QUESTIONS = 30
AUTO_OPERATING_QUESTIONS = 12
AUTO_OPERATING_TIME_CAP = 240.0
# The reader's demo (``program.adaptation.reader_demo``) comes from the written questions, or, where
# the judges adapted from headings, from DEMO_QUESTIONS written for it within DEMO_TIME_CAP seconds.
DEMO_QUESTIONS = 4
DEMO_TIME_CAP = 120.0


def questions_to_write(kb, questions: int | None, time_cap: float | None) -> tuple[int, float, str | None]:
    """How many questions the LM writes for ``kb`` and in how many seconds, and a note saying why.

    ``questions=None`` (the default of ``program index``) is 0 when the documents give at least
    ``MIN_HEADING_QUESTIONS`` heading questions (``program.adaptation.synthetic_rows.heading_questions``),
    else ``AUTO_QUESTIONS`` within ``AUTO_TIME_CAP`` seconds (or ``time_cap`` when given); a
    number is kept as given. Returns ``(questions, time_cap, note or None)``.
    """

    cap = DEFAULT_TIME_CAP if time_cap is None else time_cap
    if questions is not None:
        return questions, cap, None
    headings = len(heading_questions(kb, max_questions=MIN_HEADING_QUESTIONS))
    if headings >= MIN_HEADING_QUESTIONS:
        return 0, cap, None
    cap = AUTO_TIME_CAP if time_cap is None else time_cap
    return AUTO_QUESTIONS, cap, (f"{headings} heading(s) to ask from: the LM writes up to {AUTO_QUESTIONS} questions "
                                 f"for its chunks to adapt from (at most {cap / 60:.0f} minutes, once; "
                                 "--questions 0 adapts from headings only)")


@dataclass
class AdaptResult:
    """What :func:`adapt_judges` did.

    Attributes:
        judges: the adapted ``JudgeSet`` (its ``adapted`` entry says what it was built from).
        path: where the judges are kept (a file, or a database table and name).
        reused: True when saved judges with the same ``stamp`` were loaded instead of fitted.
        seconds: wall-clock seconds of this call.
        refresh: how the knowledge base's own rows were had (made, refit, kept); None when reused.
    """

    judges: object
    path: str
    reused: bool
    seconds: float
    refresh: Refresh | None = None

    def line(self) -> str:
        """One line saying what was built (or reused)."""
        a = self.judges.adapted
        rows = a.get("rows", {})
        what = (f"{a.get('name')}: {a.get('documents')} documents, {a.get('chunks')} chunks; "
                f"{rows.get('questions_kept', 0)} of {rows.get('questions_asked', 0)} questions kept; "
                f"{', '.join(f'{rows.get(j.name, 0)} {j.name}' for j in TRAINED)} rows "
                f"of its own beside {', '.join(a.get('sources', []))}")
        if self.reused:
            return f"judges adapted to {what}: reused {self.path} (documents unchanged, {self.seconds:.1f} s)"
        how = f"; {self.refresh.line()}" if self.refresh else ""
        return f"judges adapted to {what}: saved {self.path} in {self.seconds:.0f} s{how}"


def adapt_code() -> list[Path]:
    """The code that turns documents and labeled pairs into adapted judges: a change re-adapts."""
    folders = ("judges", "judgments", "adaptation")
    return [p for folder in folders for p in sorted((ROOT / "program" / folder).glob("*.py"))
            if p.name not in JUDGE_USERS]


def adapt_stamp(kb, compiled_dir, leave_out, questions: int, seed: int) -> str:
    """sha256 (16 hex digits) of the knowledge base's documents (``corpus_key``), the saved labeled
    pairs (``labeled_stamp``), the sources left out, the code and the options: saved judges with
    this stamp are reused."""
    digest = hashlib.sha256(f"{corpus_key(kb)}|{labeled_stamp(compiled_dir)}|{json.dumps(sorted(leave_out))}|"
                            f"{questions}|{seed}".encode())
    digest.update(_code_digest().encode())
    return digest.hexdigest()[:16]


def _code_digest() -> str:
    """sha256 of the adapting code (``adapt_code``), names and bytes."""
    digest = hashlib.sha256()
    for path in adapt_code():
        digest.update(path.relative_to(ROOT).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def rows_stamp(questions: int, seed: int, embedder) -> str:
    """What a knowledge base's own rows depend on besides its documents: the questions written,
    the seed, the embedder and the code. Rows saved with another stamp are made again."""
    return rows_key({"questions": questions, "seed": seed, "embedder": getattr(embedder, "name", ""),
                     "code": _code_digest()})


def _step_bar(progress: bool):
    """``(bar, step)``: the 4-step progress bar, and ``step(label)`` that names the step done and advances it."""
    bar = tqdm(total=4, desc="adapting judges", unit="step", file=sys.stderr,
               disable=not (progress and progress_enabled()))

    def step(label: str) -> None:
        bar.set_postfix_str(label)
        bar.update(1)

    return bar, step


def _adapted_record(kb, name: str, own, written, sources, leave_out: tuple, questions: int, stamp: str,
                    started: float) -> dict:
    """The judges' ``adapted`` record: the knowledge base, the rows it gave, the sources, settings and seconds."""
    chunks = kb.chunks
    return {
        "corpus": corpus_key(kb), "name": name, "documents": len({c.doc_id for c in chunks}), "chunks": len(chunks),
        "rows": {"questions_asked": own.counts["asked"], "questions_kept": own.counts["kept"],
                 "written_kept": sum(bool(r.get("kept")) for r in written or []),
                 **{j.name: len(p) for j, p in ((PASSAGE, own.passage), (STRIP, own.strip), (SUPPORT, own.support))}},
        "sources": [s.name for s in sources], "leave_out": list(leave_out), "questions": questions,
        "stamp": stamp, "seconds": round(time.perf_counter() - started, 1),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def adapt_judges(kb, compiled_dir, *, name: str | None = None, leave_out=(), questions: int = DEFAULT_QUESTIONS,
                 time_cap: float = DEFAULT_TIME_CAP, seed: int = 0, force: bool = False, embedder=None,
                 sources=None, log=print, progress: bool = True) -> AdaptResult:
    """Adapt the judges to ``kb`` from its own documents and keep them with it, for ``compiled_dir``.

    Args:
        kb: a knowledge base (faiss or pgvector): its ``chunks``, ``search_batch`` and ``manifest``.
        compiled_dir: the compile whose judges are adapted (``compiled/``).
        name: a name for figures and the one-line report (default: the indexed folder's name).
        leave_out: labeled sources (by name: ``popqa``, a domain's) whose pairs are not learned from.
        questions: questions the configured DSPy LM writes for sampled chunks (0: headings only).
        time_cap: seconds the LM may spend writing questions (what was written is kept).
        progress: show a progress bar (on a terminal, or with ``CRAG_PROGRESS=1``).
        force: fit again, every row made again, even when judges with the same stamp are saved.
        sources: the labeled sources (``SourcePairs``) to fit beside the knowledge base's own rows;
            default those the compile saved in ``compiled_dir`` (``load_labeled``), less ``leave_out``.

    Returns:
        An :class:`AdaptResult`; its ``refresh`` says whether the rows of unchanged files were kept
        (``program.adaptation.own_rows``).

    Raises:
        ValueError: the knowledge base gives no question (no heading of two or more words and no
            kept written question), or a judge would get a single label class;
            ``program.adaptation.labeled.LabeledPairsError`` (a ``ValueError``): no saved labeled pairs.
        OSError: the judges cannot be written (the previous ones stay).
    """
    started = time.perf_counter()
    leave_out = tuple(sorted(set(leave_out)))
    state = adapted_state(compiled_dir, kb)
    if state is None:
        raise ValueError(f"{kb!r} has no manifest of its files: it cannot be adapted to")
    stamp = adapt_stamp(kb, compiled_dir, leave_out, questions, seed)
    saved = None if force else load_adapted(compiled_dir, kb)
    if saved is not None and saved.adapted.get("stamp") == stamp:
        return AdaptResult(saved, f"{state.where}/judges.json", True, time.perf_counter() - started)

    embedder = embedder or get_embedder()
    name = name or Path(str(kb.manifest.get("source_path") or "knowledge base")).name
    bar, step = _step_bar(progress)
    written = None
    if questions:
        written = write_questions(kb, questions, time_cap, seed=seed, log=log, where=state)
    step("written questions")
    # its own rows before the labeled sources: a knowledge base that gives none fails in seconds
    own, refresh = own_rows(f"{name} (documents)", kb, embedder, state, rows_stamp(questions, seed, embedder),
                            seed=seed, written=written, force=force, log_line=log)
    step("own rows")
    sources = load_labeled(compiled_dir, leave_out) if sources is None else sources
    step("labeled sources")
    judges = fit_judges(sources + [own], embedder, log=log)
    step("fitted")
    bar.close()
    record = _adapted_record(kb, name, own, written, sources, leave_out, questions, stamp, started)
    judges = replace(judges, adapted={**record, "rows_refresh": refresh.how, "rows_changed": list(refresh.changed)})
    where = write_judges(judges, state)
    return AdaptResult(judges.for_knowledge_base(kb), where, False, time.perf_counter() - started, refresh)


def adapt_and_report(kb, compiled_dir, **options) -> int:
    """:func:`report_adaptation`'s exit code: 0, or 2 on an error."""
    return report_adaptation(kb, compiled_dir, **options)[0]


def report_adaptation(kb, compiled_dir, *, name: str, leave_out=(), questions: int | None = DEFAULT_QUESTIONS,
                      time_cap: float | None = DEFAULT_TIME_CAP, force: bool = False, model: str | None = None,
                      api_base: str | None = None, no_rows_is_error: bool = True) -> tuple[int, AdaptResult | None]:
    """:func:`adapt_judges` for a command: the LM configured when it writes questions, the one-line
    report on stdout, a failure in one line on stderr. Returns ``(0, the result)``, or ``(2, None)``
    on an error; a knowledge base that gives no question is a warning (``(0, None)``) when
    ``no_rows_is_error`` is false (after ``index``). ``questions=None`` lets the documents decide
    (``questions_to_write``: written questions when they have no headings), and says so on stderr."""
    questions, time_cap, note = questions_to_write(kb, questions, time_cap)
    if note:
        print(f"note: {name}: {note}", file=sys.stderr)
    if questions:
        # lazy on purpose: the LM loads only when questions are written
        import dspy

        from program.lm.configure import configure_lm

        dspy.configure(lm=configure_lm(model, api_base).copy(temperature=0.0))
    try:
        result = adapt_judges(kb, compiled_dir, name=name, leave_out=leave_out, questions=questions,
                              time_cap=time_cap, force=force)
    except ValueError as exc:
        if no_rows_is_error:
            print(f"error: {name}: {exc}", file=sys.stderr)
            return 2, None
        print(f"warning: judges not adapted to {name}: {exc}; the compile's own judges will judge it", file=sys.stderr)
        return 0, None
    except OSError as exc:
        where = getattr(adapted_state(compiled_dir, kb), "where", compiled_dir)
        print(f"error: cannot save the adapted judges into {where}: {exc.strerror or exc}; "
              "the previous ones are unchanged", file=sys.stderr)
        return 2, None
    print(result.line())
    return 0, result


__all__ = ["AdaptResult", "adapt_and_report", "adapt_judges", "adapt_stamp", "questions_to_write", "report_adaptation",
           "rows_stamp"]
