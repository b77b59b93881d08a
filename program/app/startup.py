"""From the command line's flags to a running program, shared by ``ask``, ``serve`` and ``index``:
check what needs no model first (``check_setup``), then load the knowledge base and the compiled
program (``build_program_from_flags``). Every failure is a ``SetupError`` with one line for the user.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from program.app import resources
from program.app.compiled import COMPILED_DIR, CompiledError, has_compiled
from program.app.factory import build_program
from program.app.flags import SetupError, check_program_flags
from program.app.tracing import enable_exporter
from program.env import env_flag
from program.guards.caps import QuestionCaps
from program.judges import JudgesFileError
from program.lm.configure import missing_key
from program.retrieval import CorpusError, EmbeddingError, KnowledgeBaseError
from program.retrieval.corpus import follows_outside_links, left_out, outside_links
from program.retrieval.postgres.url import is_database_url
from program.web.base import WebSearchError
from program.web.config import WebConfig
from program.web.registry import build_backend


def web_config(args):
    """The ``WebConfig`` the flags and environment ask for (``web_choice``). Raises ValueError for a bad value."""
    return web_choice(args)[0]


def web_choice(args) -> tuple:
    """``(WebConfig, why)``: the web the flags and environment ask for (flags win) and which of them
    chose it: ``--web NAME``, ``CRAG_WEB``, or, with neither, the knowledge base's default
    (``resources.default_web``: the snapshot for PopQA, no web for a user's own), said so.
    Raises ValueError for a bad value."""
    default = resources.default_web(resources.kb_location(args.kb))
    backend = args.web or (None if os.environ.get("CRAG_WEB") else default)
    why = (f"--web {args.web}" if args.web else "CRAG_WEB" if os.environ.get("CRAG_WEB") else
           "the default for a knowledge base of your own; --web NAME adds one" if default == "none" else
           "the default for the PopQA knowledge base")
    return WebConfig.from_env(backend=backend, searx_url=args.searx_url, allowed_domains=args.web_allow,
                              blocked_domains=args.web_block,
                              allow_private=True if args.allow_private_urls else None), why


def check_setup(args):
    """Check what needs no model (the web backend, the compiled folder, the exporter) before loading
    anything heavy; return the ``WebConfig``. Raises ``SetupError``."""
    try:
        config = web_config(args)
        build_backend(config)
        if args.trace_export:
            enable_exporter(args.trace_export)
    except (WebSearchError, ValueError) as exc:
        raise SetupError(str(exc)) from None
    if args.compiled and args.compiled != "none" and not has_compiled(args.compiled):
        raise SetupError(f"--compiled {args.compiled}: no compiled program there")
    check_program_flags(args)
    if problem := missing_key(args.model, args.api_base):
        raise SetupError(problem)
    location = resources.kb_location(getattr(args, "kb", None))
    if location and not is_database_url(location) and not os.path.lexists(location):
        raise SetupError(f"{'--kb' if args.kb else 'CRAG_KB'} {location}: no such file or folder")
    try:
        QuestionCaps.from_env()
    except ValueError as exc:
        raise SetupError(str(exc)) from None
    return config


def report_left_out(source, kb=None) -> int:
    """Print one ``note:`` line on stderr per file the corpus folder ``source`` leaves out (and why):
    unsupported types, links to files or folders outside it, and the PDF or Office files ``kb`` (its
    index) could not read; then their count. With ``CRAG_OUTSIDE_LINKS=follow``, one line per such
    link read instead. A database URL or None (the PopQA knowledge base) prints nothing. Returns the count."""
    if not source or is_database_url(str(source)):
        return 0
    unreadable = list((getattr(kb, "manifest", None) or {}).get("unreadable", []))
    lines = [f"left out {line}" for line in left_out(source)] + [f"left out: {line}" for line in unreadable]
    if follows_outside_links():  # read, as the operator asked: said, since clients may be shown their text
        for link in outside_links(source):
            print(f"note: {link} links outside the knowledge base and is read (CRAG_OUTSIDE_LINKS=follow)",
                  file=sys.stderr)
    for line in lines:
        print(f"note: {line}", file=sys.stderr)
    if lines:
        print(f"note: {len(lines)} file(s) left out of {source}; the rest was read", file=sys.stderr)
    return len(lines)


def build_program_from_flags(args, config, *, decide_retrieval: bool | None = None):
    """Load the knowledge base and the (compiled) CRAG program the flags ask for.

    ``decide_retrieval`` None follows ``--decide-retrieval`` / ``CRAG_DECIDE_RETRIEVAL``.
    The caps of ``program.guards.caps`` (environment) are given at construction. Raises ``SetupError`` (one line) for
    an unreadable corpus, an index that cannot be written, or a broken compiled folder.
    """
    try:
        kb = resources.knowledge_base(resources.kb_location(args.kb))
    except (CorpusError, KnowledgeBaseError, EmbeddingError, FileNotFoundError, ValueError) as exc:
        raise SetupError(str(exc)) from None
    except OSError as exc:  # e.g. no space left for the index: the previous one stays
        raise SetupError(f"cannot write the index of {args.kb or 'the PopQA knowledge base'}: "
                         f"{exc.strerror or exc}") from None
    return program_for(args, config, kb, decide_retrieval=decide_retrieval)


def program_for(args, config, kb, *, decide_retrieval: bool | None = None, quiet: bool = False):
    """The (compiled) CRAG program the flags ask for, over the knowledge base ``kb`` already
    opened (``serve`` reloads a re-indexed one this way). ``quiet``: no note on stderr.

    Raises:
        SetupError: a broken compiled folder or judges file (one line)."""
    try:
        return _load_program(args, config, kb, decide_retrieval, quiet)
    except (CompiledError, JudgesFileError) as exc:
        raise SetupError(str(exc)) from None


def _load_program(args, config, kb, decide_retrieval, quiet=False):
    if decide_retrieval is None:
        decide_retrieval = bool(args.decide_retrieval or env_flag("CRAG_DECIDE_RETRIEVAL"))
    compiled = Path(args.compiled) if args.compiled and args.compiled != "none" else COMPILED_DIR
    if args.compiled != "none" and not has_compiled(compiled) and not quiet:
        print("note: no compiled program found; using the uncompiled signatures", file=sys.stderr)
    return build_program("self-crag", compiled_dir=None if args.compiled == "none" else compiled, knowledge_base=kb,
                         web=build_backend(config), decide_retrieval=decide_retrieval,
                         **({"k": args.k} if args.k else {}))
