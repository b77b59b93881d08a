"""``python -m program index PATH``: index the documents (only what changed), then adapt the
judges to them, write the reader's demo and set the operating point, keeping all of it with the
knowledge base (``program.judges.adapted.adapted_state``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path



def index_command(args) -> int:
    """Run ``index`` for the parsed ``args``: 0, or 2 with one line on stderr."""
    # lazy on purpose, as in _ask: the index command's modules only
    from program.app import resources
    from program.app.flags import SetupError, check_index_flags, use_embedder
    from program.app.startup import report_left_out
    from program.retrieval import CorpusError, EmbeddingError, KnowledgeBaseError
    from program.retrieval.embedder_choice import knowledge_base_embedder
    from program.retrieval.postgres.url import is_database_url

    try:  # refused before any indexing
        check_index_flags(args)
        use_embedder(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    target = resources.kb_location(args.kb)
    try:
        if is_database_url(target):
            try:
                # psycopg loads only for a database URL
                from program.retrieval.postgres import PgVectorKnowledgeBase
            except ImportError as exc:
                raise KnowledgeBaseError(f"a postgresql:// knowledge base needs the postgres extra ({exc.name} is "
                                         "missing): pip install 'crag-dspy[postgres]'") from None
            with PgVectorKnowledgeBase.build(args.path, target, knowledge_base_embedder()) as kb:
                report_left_out(args.path)
                r = kb.last_ingest
                print(f"indexed {r.chunks} chunks from {args.path} into {kb.url}: {len(r.published)} file(s) "
                      f"updated, {r.unchanged} unchanged, {len(r.removed)} removed, {r.embedded} chunks embedded")
                return _adapt(args, kb)
        if args.kb:
            print("error: --kb for index takes a postgresql:// URL; for a folder use --out", file=sys.stderr)
            return 2
        started = time.perf_counter()
        kb = resources.knowledge_base(args.path, args.out, other_embedder="rebuild")
    except (CorpusError, FileNotFoundError, KnowledgeBaseError, EmbeddingError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. no space left on the device: the previous index stays
        print(f"error: cannot write the index of {args.path} into "
              f"{args.out or resources.index_dir_for(Path(args.path))}: "
              f"{exc.strerror or exc}; the previous index is unchanged", file=sys.stderr)
        return 2
    report_left_out(args.path, kb)
    out = args.out or resources.index_dir_for(Path(args.path))
    embedded = kb.manifest.get("embedded_chunks", 0) if kb.changes and not kb.changes.none else 0
    print(f"indexed {len(kb)} chunks from {args.path} into {out}: {kb.changes.line() if kb.changes else 'reused'}"
          f", {embedded} embedded ({time.perf_counter() - started:.1f} s)")
    return _adapt(args, kb)


def _adapt(args, kb) -> int:
    """After indexing: adapt the compile's judges to ``kb`` from its documents (``program.adaptation.adapt``),
    unless ``--no-adapt``; reused while the documents are unchanged. 0, or 2 with one line."""
    # lazy on purpose: dspy loads only when indexing is done
    from program.app.compiled import COMPILED_DIR, has_compiled

    if args.no_adapt:
        print("judges not adapted (--no-adapt): the compile's own judges will judge this knowledge base")
        return 0
    compiled = Path(args.compiled) if args.compiled else COMPILED_DIR
    if not has_compiled(compiled):
        print(f"note: no compiled program in {compiled}: no judges to adapt", file=sys.stderr)
        return 0
    # lazy on purpose: the training code (sklearn, the labeled sources) loads only when adapting
    from program.adaptation.adapt import questions_to_write, report_adaptation

    questions = questions_to_write(kb, args.questions, args.time_cap)[0]
    code, result = report_adaptation(kb, compiled, name=Path(args.path).name or str(args.path),
                                     questions=args.questions, time_cap=args.time_cap, model=args.model,
                                     api_base=args.api_base, no_rows_is_error=False)
    if code:
        return code
    # the documents changed little (or not at all): what was set from them still holds
    small = result is not None and (result.reused or result.refresh.how != "made")
    code = _reader_demo(args, kb, compiled, questions, keep=small)
    if code or not questions:
        return code
    return _operating_point(args, kb, compiled, questions, keep=small)


def _reader_demo(args, kb, compiled: Path, written: int, keep: bool = False) -> int:
    """Write the reader's demo from ``kb``'s own documents (``program.adaptation.reader_demo``): from
    the ``written`` questions that adapted the judges, else from a few written for it (one LM
    call each). With ``keep`` (the documents changed little), a saved demo the knowledge base still
    holds (``held_by``) stays. 0, or 2 with one line."""
    # lazy on purpose: the question writer and the LM load only here
    from program.adaptation.adapt import DEMO_QUESTIONS, DEMO_TIME_CAP
    from program.adaptation.lm_questions import write_questions
    from program.adaptation.reader_demo import held_by, load_reader_demo, reader_demo, save_reader_demo
    from program.judges.adapted import adapted_state

    where = adapted_state(compiled, kb)
    if where is None:
        return 0
    saved = load_reader_demo(where) if keep else None
    if saved is not None and held_by(kb, saved):
        print(f"reader demo kept (the documents still hold it): {saved['question']}")
        return 0
    if not written:  # adapted from headings: no LM configured yet
        # lazy on purpose: the LM loads only when a demo must be written
        import dspy

        from program.lm.configure import configure_lm

        dspy.configure(lm=configure_lm(args.model, args.api_base).copy(temperature=0.0))
    rows = write_questions(kb, n=written or DEMO_QUESTIONS, time_cap=0.0 if written else DEMO_TIME_CAP,
                           log=lambda *_: None, progress=False, where=where)  # with ``written``, the cache: no call
    demo = reader_demo(kb, rows)
    if demo is None:
        print("note: no written question made a reader demo; the compiled demos stay", file=sys.stderr)
        return 0
    return _saved(lambda: save_reader_demo(demo, where), "the reader demo", where.where,
                  f"reader demo written from {demo['chunk_id']}: {demo['question']}")


def _operating_point(args, kb, compiled: Path, written: int, keep: bool = False) -> int:
    """After adapting from ``written`` questions: set where to abstain on ``kb`` from drafts of
    them and of their look-alikes (``program.judges.operating_point``). When the documents chose
    to write questions (no ``--questions``), fewer drafts within a time cap keep ``index`` within
    minutes. With ``keep`` (the documents changed little), a saved point stays. 0, or 2 with one line."""
    # lazy on purpose: the question writer, the compiled program and the LM load only when questions were written
    from program.adaptation.adapt import AUTO_OPERATING_QUESTIONS, AUTO_OPERATING_TIME_CAP, DEFAULT_OPERATING_QUESTIONS
    from program.adaptation.lm_questions import write_questions
    from program.app.configuration import load_compiled
    from program.judges.adapted import adapted_state
    from program.judges.operating_point import read_operating_point, save_operating_point, set_operating_point
    from program.retrieval.progress import progress_enabled

    where = adapted_state(compiled, kb)
    if where is None:
        print("note: this knowledge base has no manifest; the compile's operating point stays", file=sys.stderr)
        return 0
    saved = read_operating_point(where) if keep else None
    if saved is not None:
        print(f"operating point kept (the documents changed little since it was set): accept {saved['accept']:.2f}")
        return 0
    auto = args.questions is None
    many = args.operating_questions or (AUTO_OPERATING_QUESTIONS if auto else DEFAULT_OPERATING_QUESTIONS)
    rows = write_questions(kb, n=written, time_cap=0.0, log=lambda *_: None, progress=False,
                           where=where)  # the cache: no call
    questions = [r["question"] for r in rows if r.get("kept")][:many]
    if not questions:
        print("note: no written question was kept; the compile's operating point stays", file=sys.stderr)
        return 0
    started = time.perf_counter()
    crag = load_compiled(compiled, knowledge_base=kb, web=None)
    try:
        point = set_operating_point(crag, questions, args.decline, time_cap=AUTO_OPERATING_TIME_CAP if auto else None,
                                    progress=progress_enabled())
    except ValueError as exc:  # too few drafts within the time cap
        print(f"note: {exc}; the compile's operating point stays", file=sys.stderr)
        return 0
    return _saved(lambda: save_operating_point(point, where), "the operating point", where.where,
                  f"{point.line()} (set in {time.perf_counter() - started:.0f} s)")


def _saved(save, what: str, where: str, line: str) -> int:
    """Run ``save()`` (an all-or-nothing write into ``where``, the knowledge base's state), then
    print ``line``: 0; or one error line naming ``what`` when the write fails (the previous one
    stays): 2."""
    try:
        save()
    except OSError as exc:
        print(f"error: cannot save {what} into {where}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(line)
    return 0
