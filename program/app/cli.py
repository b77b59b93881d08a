"""Command line: ``python -m program ask "question"``, ``python -m program serve`` and
``python -m program index PATH``."""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from program.lm.options import add_lm_options
from program.web.config import BACKEND_NAMES


EMBEDDER_HELP = ("the knowledge base's embedder: BASE_URL#MODEL of an OpenAI-compatible embeddings server "
                 "(TEI, vLLM, Infinity, Ollama, a hosted API), e.g. http://127.0.0.1:8080/v1#BAAI/bge-small-en-v1.5, "
                 "or 'local'; env CRAG_EMBEDDER (default: all-MiniLM-L6-v2 in this process)")


STATE_HELP = ("folder for the knowledge bases' indexes and what is learned about each (adapted judges, operating "
              "point, reader demo); env CRAG_STATE_DIR (default: the cache folder, per user, never the install prefix)")


def _program_options(parser: argparse.ArgumentParser, several_kbs: bool = False) -> None:
    """The options ``ask`` and ``serve`` share: model, knowledge base, web, compiled program, tracing;
    ``serve`` (``several_kbs``) takes ``--kb`` more than once, each as NAME=PATH."""
    add_lm_options(parser)
    kb_help = ("corpus file or folder to answer from, or a pgvector knowledge base "
               "postgresql://user@host:port/db?table=NAME; env CRAG_KB (default: the PopQA knowledge base)")
    if several_kbs:
        parser.add_argument("--kb", action="append", metavar="[NAME=]PATH",
                            help=kb_help + "; repeat as NAME=PATH to serve several, each a model of /v1/models "
                                           "and a knowledge_base of /ask")
    else:
        parser.add_argument("--kb", help=kb_help)
    parser.add_argument("--embedder", metavar="BASE_URL#MODEL", help=EMBEDDER_HELP + "; the index must have been "
                                                                     "built with it")
    parser.add_argument("--state", metavar="DIR", help=STATE_HELP)
    parser.add_argument("--web", default=None, choices=BACKEND_NAMES, metavar="NAME",
                        help=f"web backend for the corrective path: {', '.join(BACKEND_NAMES)}; env CRAG_WEB "
                             "(default: snapshot, offline, for the PopQA knowledge base; none for a --kb of your own)")
    parser.add_argument("--searx-url", help="SearXNG base URL for --web searxng; env SEARXNG_URL")
    parser.add_argument("--web-allow", help="comma-separated domains the web path may use (and their subdomains), "
                                            "e.g. wikipedia.org; env CRAG_WEB_ALLOW")
    parser.add_argument("--web-block", help="comma-separated domains the web path never uses; env CRAG_WEB_BLOCK")
    parser.add_argument("--allow-private-urls", action="store_true",
                        help="let the web path fetch loopback and private-network addresses (tests, self-hosted)")
    parser.add_argument("--compiled", default=None,
                        help="compiled program folder (default: compiled/ when present); "
                             "'none': the uncompiled signatures")
    parser.add_argument("-k", type=int, default=None, help="passages retrieved and graded (default 3)")
    parser.add_argument("--decide-retrieval", action="store_true",
                        help="first ask whether the question needs sources at all; greetings, arithmetic and "
                             "rewording requests are then answered without retrieval; env CRAG_DECIDE_RETRIEVAL=1")
    parser.add_argument("--trace-jsonl", metavar="PATH", help="append one JSON line per step to PATH")
    parser.add_argument("--trace-export", choices=("mlflow",),
                        help="also send DSPy's traces to MLflow (pip install mlflow)")


def _filter_options(ask: argparse.ArgumentParser) -> None:
    """``ask``'s filters: read only part of the knowledge base (``program.retrieval.filters``)."""
    group = ask.add_argument_group("filters", "read only part of the knowledge base (the web is not filtered)")
    group.add_argument("--path", action="append", metavar="GLOB",
                       help="only files matching GLOB, relative to the indexed folder ('runbooks/', 'hr/**/*.pdf'); "
                            "repeat for any of several")
    group.add_argument("--type", action="append", metavar="EXT", help="only files of this type (pdf, md, docx ...); "
                                                                        "repeat for several")
    group.add_argument("--pages", metavar="FIRST-LAST", help="only PDF pages in this range ('3-10', '5')")
    group.add_argument("--modified-since", metavar="YYYY-MM-DD", help="only files modified on or after this day (UTC)")
    group.add_argument("--modified-until", metavar="YYYY-MM-DD", help="only files modified on or before this day")


def _serve_options(serve: argparse.ArgumentParser) -> None:
    """``serve``'s own flags: where it listens, its queue and time limits, keys and hosts."""
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    serve.add_argument("--concurrency", type=int, default=None,
                       help="questions answered at once (default: 1 with the embedded model, 8 with a served one); "
                            "the others wait in the queue")
    serve.add_argument("--max-queue", type=int, default=64, help="questions waiting at most; more get 503 (default 64)")
    serve.add_argument("--timeout", type=float, default=300.0,
                       help="seconds a question may take, waiting included; then 504 (default 300)")
    serve.add_argument("--read-timeout", type=float, default=30.0,
                       help="seconds a client may take to send its request line and headers, and again its body; "
                            "then 408, and a connection that sends nothing is closed (default 30)")
    serve.add_argument("--api-key", default=None,
                       help="require 'Authorization: Bearer KEY' on every route but /healthz and the page's files; "
                            "env CRAG_SERVE_API_KEY (better: not seen in the process list); at least 16 characters")
    serve.add_argument("--keys", metavar="FILE",
                       help="a keys file: one key per entry (its SHA-256), its name, the knowledge bases it may ask "
                            "and path globs inside each (docs/service.md); read again when it changes; env "
                            "CRAG_SERVE_KEYS. Make a key with: key NAME --kb KB[=GLOB] --keys-file FILE")
    serve.add_argument("--audit-questions", action="store_true",
                       help="put each question's text in its audit line (the log has none by default)")
    serve.add_argument("--no-api-key", action="store_true",
                       help="serve a non-loopback --host without a key (refused otherwise)")
    serve.add_argument("--reload-interval", type=float, default=2.0, metavar="SECONDS",
                       help="how often to look for a new build of each knowledge base (index run again, judges "
                            "adapted again) and switch to it between requests; 0: never (default 2)")
    serve.add_argument("--allowed-hosts", default=None,
                       help="comma-separated host names clients may call this server by (Host and Origin headers), "
                            "besides the address it listens on and, on loopback, localhost; env CRAG_ALLOWED_HOSTS")


def _key_options(key: argparse.ArgumentParser) -> None:
    """``key NAME --kb KB[=GLOB] --keys-file FILE``."""
    key.add_argument("name", help="the key's name, as the audit line shows it")
    key.add_argument("--kb", action="append", required=True, metavar="KB[=GLOB]",
                     help="a knowledge base it may ask, by its served name, and a path glob inside it (whole "
                          "without one); repeat for more knowledge bases or globs")
    key.add_argument("--keys-file", required=True, metavar="FILE", help="the keys file to add it to (made if missing)")


def _index_target_options(index: argparse.ArgumentParser) -> None:
    """``index``'s what and where: the documents, the faiss folder or pgvector table, the embedder."""
    index.add_argument("path", help="a file or a folder (searched recursively; hidden files skipped)")
    index.add_argument("--out", help="faiss index folder (default: in the cache folder)")
    index.add_argument("--kb", help="index into this pgvector knowledge base instead, "
                                    "postgresql://user@host:port/db?table=NAME; env CRAG_KB when it is such a URL")
    index.add_argument("--embedder", metavar="BASE_URL#MODEL", help=EMBEDDER_HELP + "; another than the index's "
                                                                    "rebuilds it")
    index.add_argument("--state", metavar="DIR", help=STATE_HELP)


class _OneLineParser(argparse.ArgumentParser):
    """Bad usage is one line naming the flag and the problem, exit 2 (argparse prints the usage too)."""

    def error(self, message):
        self.exit(2, f"error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    # installed, the console command is ``crag``; from a clone, ``python -m program``
    prog = "crag" if Path(sys.argv[0]).name == "crag" else "python -m program"
    parser = _OneLineParser(prog=prog, description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer one question with CRAG")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    _filter_options(ask)
    _program_options(ask)
    serve = sub.add_parser("serve", help="answer over HTTP: POST /ask, POST /ask/stream, GET / (the page), /docs")
    _serve_options(serve)
    _program_options(serve, several_kbs=True)
    _key_options(sub.add_parser("key", help="make a key for serve --keys: print it once, add its SHA-256 to the "
                                            "keys file"))
    index = sub.add_parser("index", help="build (or reuse) a knowledge base index over PATH",
                           description="Index the documents under PATH: Markdown (.md, .markdown), text (.txt), HTML "
                                       "(.html, .htm), JSONL (.jsonl), and with the documents extra "
                                       "(pip install 'crag-dspy[documents]') PDF (.pdf, with page numbers; no OCR), "
                                       "Word (.docx), PowerPoint (.pptx), Excel (.xlsx) and CSV (.csv). Other files, "
                                       "and files "
                                       "that cannot be read, are left out with one line each.")
    _index_target_options(index)
    index.add_argument("--no-adapt", action="store_true",
                       help="do not adapt the judges to the indexed documents (they are by default: minutes, once)")
    index.add_argument("--compiled", default=None,
                       help="the compiled program whose judges are adapted (default compiled/)")
    index.add_argument("--questions", type=int, default=None,
                       help="questions the LM writes for sampled chunks to adapt from (default: none when the "
                            "documents have headings to ask from, else 40)")
    index.add_argument("--time-cap", type=float, default=None,
                       help="seconds the LM may spend writing those questions (default 900; 540 for the 40 of a "
                            "knowledge base without headings)")
    add_lm_options(index, role="the LM that writes questions and the reader's demo", cache=False)
    index.add_argument("--decline", type=float, default=0.1,
                       help="when questions are written: the share of the knowledge base's own questions whose "
                            "answers the operating point declines (default 0.1)")
    index.add_argument("--operating-questions", type=int, default=None,
                       help="when questions are written: how many of them set the operating point (default 30; "
                            "without headings 12, within 4 minutes; one LM call each, and one per look-alike)")
    return parser


def _ask(args) -> int:
    # lazy on purpose: dspy, torch and the model load only for the subcommand that needs them, so --help and a
    # refused question answer at once
    from program.app import resources
    from program.app.flags import use_embedder
    from program.app.startup import SetupError, build_program_from_flags, check_setup, report_left_out
    from program.judgments import PASSAGE
    from program.guards.question import QuestionError, validate_question
    from program.retrieval.filters import DocumentFilter, FilterError

    try:  # before loading anything heavy: the question, the flags, then the knowledge base
        validate_question(args.question)
        documents = DocumentFilter.from_flags(args.path, args.type, args.pages, args.modified_since,
                                              args.modified_until)
        config = check_setup(args)
        use_embedder(args)
        program = build_program_from_flags(args, config)
    except (QuestionError, SetupError, FilterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if documents is not None:  # read through the filter: search, vocabulary, names, demos
        program = program.narrowed(program.settings, documents=documents)
    report_left_out(resources.kb_location(args.kb), getattr(program, "knowledge_base", None))
    report = program.judges_report() if hasattr(program, "judges_report") else {}
    if report and not report["adapted"] and not report["calibrated_here"] and report["judgments"][PASSAGE.name] not in (
            "lm", "similarity"):
        print(f"note: the judges were not adapted to {args.kb or os.environ.get('CRAG_KB')}; they judge it from "
              "other knowledge bases' rows (adapt: python -m program index PATH)", file=sys.stderr)
    result = _answer(args, program)
    if isinstance(result, str):
        print(f"error: {result}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _print_result(result, config, args)
        print(_operating_point_line(program))
    return 0


def _answer(args, program):
    """Configure the LM and answer ``args.question`` with ``program`` (its steps to ``--trace-jsonl``):
    the result, or one line saying why there is none (the LM's chunk wheels are missing, the LM or the
    database failed and stayed down). Never a traceback for an LM failure."""
    # lazy on purpose, as in _ask
    import dspy
    from dspy.utils.exceptions import LMError

    from program.app.tracing import JsonlTrace, StepRecorder
    from program.lm.configure import configure_lm, model_name
    from program.lm.model_files import ModelFilesError
    from program.lm.retry import LMServiceError, error_line
    from program.retrieval import EmbeddingError, KnowledgeBaseError

    try:
        lm = configure_lm(args.model, args.api_base, cache=not args.no_cache)
    except (ModelFilesError, ValueError) as exc:  # e.g. the embedded model's chunk wheels are not installed
        return str(exc)
    recorder = StepRecorder(JsonlTrace(args.trace_jsonl)) if args.trace_jsonl else None
    try:
        with dspy.context(callbacks=[recorder] if recorder else []):
            result = program(question=args.question)
    except (KnowledgeBaseError, EmbeddingError, LMServiceError) as exc:  # the database, the embedding server or
        return str(exc)  # the LM went away and stayed away
    except LMError as exc:  # any other LM failure that got this far
        return (f"the language model at {args.api_base or os.environ.get('CRAG_API_BASE') or model_name(lm)} "
                f"failed: {error_line(exc)}")
    if recorder:
        recorder.emit("result", result=result.to_dict())
    return result


def _operating_point_line(program) -> str:
    """``operating point: answers below confidence 0.42 are declined (labels ours.csv (60 rows),
    adapted/<key>/operating_point.json)``: the point and where the resolution took it from."""
    source = getattr(program, "sources", {}).get("operating point")
    if source is None:
        return "operating point: none (uncompiled)"
    return f"operating point: answers below confidence {program.settings.accept:.2f} are declined ({source})"


def _print_result(result, config, args) -> None:
    """The answer, its action and confidence, citations, the web used, the judges and the cost."""
    from program.retrieval.filters import DocumentFilter  # lazy, as in _ask

    print(result.answer)
    if result.retrieval_skipped:
        print("\nretrieval skipped: the question needs no sources; answered without them")
    else:
        print(f"\naction: {result.action.value if result.action else 'none'}  confidence: {result.confidence:.2f}  "
              f"outcome: {result.outcome.ending.value}")
        if result.outcome.reason:
            print(_verdict_line(result))
    for c in result.citations:
        print(f"[{c.number}] {c.label}" + (f" \u2014 {c.title}" if c.title else "") + (f" <{c.url}>" if c.url else ""))
    if result.filter:
        print(f"filter: {DocumentFilter.from_dict(result.filter).describe()} (the citations come from these "
              "documents only)")
    for s in result.sentences:
        if not s.supported:
            print(f"unsupported (no strip states it): {s.text}")
    t = result.trace
    print(f"web: {_web_line(config, args)}")
    for w in t.web:
        print(f"web ({w['backend']}): query {w['query']!r}: {len(w['hits'])} hits, "
              f"{w['dropped_by_scope']} out of scope, "
              f"{len(w['fetched'])} pages fetched, {len(w['fetch_failures'])} failed"
              + (f"; {w['error']}" if w["error"] else ""))
    if t.judges:
        print(judges_line(t.judges))
    print(f"LM calls: {t.lm_calls}  tokens: {t.prompt_tokens}+{t.completion_tokens} "
          f"({t.cached_tokens} of the prompt from the cache)  seconds: {t.seconds:.1f}")


def _web_line(config, args) -> str:
    """Which web the corrective path had, and why (``startup.web_choice``): ``none (the default for a
    knowledge base of your own; --web NAME adds one)``, ``snapshot (the offline PopQA pages)``, ..."""
    # lazy on purpose, as in _ask: startup loads the web backends
    from program.app.startup import web_choice

    why = web_choice(args)[1]
    if config.backend == "snapshot":
        return f"snapshot ({config.snapshot_path or 'the offline PopQA pages'}; {why})"
    return f"{config.backend} ({why})"


def _verdict_line(result) -> str:
    """How the question ended (``program.types.Outcome``): ``declined (<why>): <the answer held
    back>``, ``stopped: <cap>`` or ``answered by the <draft|corrected answer>: <why>``."""
    outcome = result.outcome
    if outcome.fallback and outcome.ending.value == "declined":
        return f"declined ({outcome.reason}): {outcome.declined or 'no answer was written'}"
    return outcome.summary()


def judges_line(report: dict) -> str:
    """One line saying who decided each judgment and whether the judges were adapted here."""
    who = ", ".join(f"{j} {use}" for j, use in report["judgments"].items())
    if report.get("adapted"):
        where = "adapted to this knowledge base from its documents"
    elif report.get("calibrated_here"):
        where = "trained with this knowledge base's labeled rows"
    else:
        where = "NOT adapted to this knowledge base (adapt: python -m program index PATH)"
    return f"judges: {who}; {where}"


def _serve(args) -> int:
    # lazy on purpose, as in _ask: the flags' checks load nothing heavy
    from program.app.flags import SetupError, check_program_flags, check_serve_flags, use_embedder

    try:
        check_serve_flags(args)  # before importing the service: a bad flag answers at once
        check_program_flags(args)
        use_embedder(args)
        try:
            # (the subcommands' modules load dspy, torch and the service: only the one asked for)
            from program.app.service.run import serve
        except ImportError as exc:
            if exc.name not in ("fastapi", "uvicorn", "starlette"):
                raise
            raise SetupError(f"serve needs the serve extra ({exc.name} is missing): "
                             "pip install 'crag-dspy[serve]'") from None

        return serve(args)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _key(args) -> int:
    """``key NAME --kb KB[=GLOB] --keys-file FILE``: a new key, printed once; its entry added."""
    # lazy on purpose, as in _ask: the keys file's modules only
    from program.app.service.keys import KeysFileError, append_entry, new_key_entry
    from program.retrieval.filters import FilterError

    scopes: dict[str, list[str]] = {}
    for item in args.kb:
        kb, _, glob = item.partition("=")
        scopes.setdefault(kb, []).append(glob or "**")
    try:
        secret, entry = new_key_entry(args.name, scopes)
        append_entry(args.keys_file, entry)
    except (KeysFileError, FilterError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(secret)
    print(f"added {args.name!r} to {args.keys_file} (the key is shown once; the file keeps its SHA-256)",
          file=sys.stderr)
    return 0


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"warning: {message}\n"


def main(argv: list[str] | None = None) -> int:
    warnings.formatwarning = _one_line_warning  # a user sees one line per warning, not a source line
    args = _parser().parse_args(argv)
    if args.command == "key":
        return _key(args)
    if args.state is not None:
        # lazy on purpose, as in _ask: the flags' checks load nothing heavy
        from program.app.flags import SetupError, check_state

        try:
            check_state(args.state)
        except SetupError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        os.environ["CRAG_STATE_DIR"] = str(Path(args.state).absolute())  # read by program.paths.state_root
    if args.command == "index":
        # lazy on purpose, as in _ask: the index command's modules only
        from program.app.index_command import index_command

        return index_command(args)
    return {"ask": _ask, "serve": _serve}[args.command](args)
