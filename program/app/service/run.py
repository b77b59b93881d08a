"""``python -m program serve``: check the flags, take the port, load the program once, then serve it with uvicorn."""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import sys
from pathlib import Path

import uvicorn

from program.app import resources
from program.app.compiled import COMPILED_DIR, has_compiled, read_manifest
from program.app.flags import SetupError, check_serve_flags, keys_file, serve_key
from program.app.service.access import Access
from program.app.service.keys import KeysFile, KeysFileError
from program.app.service.app import create_app
from program.app.service.protocol import guarded_protocol
from program.app.service.reload import Reloader, Watched
from program.app.service.runner import QuestionRunner
from program.app.startup import build_program_from_flags, check_setup, report_left_out
from program.app.tracing import JsonlTrace
from program.env import env_flag
from program.lm.configure import configure_lm, model_name
from program.lm.model_files import EMBEDDED_MODELS
from program.retrieval.postgres.url import DatabaseURL, is_database_url


def _compiled_info(args) -> dict | None:
    if args.compiled == "none":
        return None
    folder = args.compiled or COMPILED_DIR
    if not has_compiled(folder):
        return None
    manifest = read_manifest(folder) or {}
    return {"name": Path(folder).resolve().name,
            **{k: manifest.get(k) for k in ("lm", "date", "dspy_version", "dev_score")}}


def _kb_name(location: str | None) -> str:
    """The knowledge base as the operator named it: the corpus folder's or file's name, the table's."""
    if not location:
        return "PopQA knowledge base"
    if is_database_url(location):
        return f"table {DatabaseURL.parse(location).table}"
    return Path(location).resolve().name


def model_id(location: str | None) -> str:
    """The knowledge base's name as the chat endpoint's model: ``popqa`` for the default, else the
    folder's or file's name, or the table's."""
    if not location:
        return "popqa"
    if is_database_url(location):
        return DatabaseURL.parse(location).table
    return Path(location).resolve().name


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``, taken before anything loads. Raises ``SetupError`` naming the flag."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as exc:
        raise SetupError(f"--host {host}: not an address of this machine: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        flag = "--host" if exc.errno == 99 else "--port"  # EADDRNOTAVAIL: no such address here
        raise SetupError(f"{flag}: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _log_to_stderr() -> None:
    """The operator's log: what the service keeps from its clients (error details) and the audit
    line of every question (``program.audit``) go to stderr."""
    for logger in (logging.getLogger("program.service"), logging.getLogger("program.audit")):
        if not logger.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)


NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
log = logging.getLogger("program.service")


def served_knowledge_bases(args) -> list[tuple[str, argparse.Namespace]]:
    """``(name, the flags for it)`` per ``--kb [NAME=]PATH`` (else ``CRAG_KB``, else PopQA), in
    order; a PATH without NAME is named by ``model_id``. The flags are ``args`` with ``kb`` one PATH.

    Raises:
        SetupError: a name that is not letters, digits, ``.``, ``_`` and ``-``, or one given twice; an
            empty PATH (``--kb ""``, ``--kb NAME=``) or an empty ``CRAG_KB``."""
    given = args.kb if isinstance(args.kb, list) else [args.kb]
    served: list[tuple[str, argparse.Namespace]] = []
    for value in given:
        name, sep, path = (value or "").partition("=")
        if not sep or "/" in name or ":" in name:  # a path's or a URL's own '=' (?table=...) names nothing
            name, path = "", value
        elif not path:
            raise SetupError(f"--kb {value}: the path after '=' is empty; give NAME=PATH, PATH a corpus file or "
                             "folder or a postgresql:// URL")
        name = name or model_id(resources.kb_location(path))
        if not NAME.fullmatch(name):
            raise SetupError(f"--kb {value}: a name is letters, digits, '.', '_' and '-' (at most 64), "
                             f"got {name!r}")
        if name in dict(served):
            raise SetupError(f"--kb {value}: the name {name!r} is given twice")
        served.append((name, argparse.Namespace(**{**vars(args), "kb": path})))
    return served


def serve(args) -> int:
    """Check every flag, take the port, load the LM, each knowledge base and its program, and serve
    until interrupted.

    Returns the exit code. Raises ``program.app.flags.SetupError`` for a bad flag, a port that cannot
    be taken, a backend or a corpus (all but the corpus checked before anything loads).
    """
    check_serve_flags(args)
    served = [(name, flags, check_setup(flags)) for name, flags in served_knowledge_bases(args)]
    keys = _keys(keys_file(args), [name for name, _, _ in served])
    sock = listen(args.host, args.port)
    reloader = None
    try:
        limiter, runners, infos, watched = None, {}, {}, []
        for name, flags, config in served:
            runners[name], describe = _load(flags, config, name, limiter)
            infos[name] = describe(runners[name].program)
            watched.append(Watched(name, runners[name], flags, config, describe, infos))
            limiter = runners[name].limiter  # the LM's slots are one, whichever knowledge base asks
        reloader = Reloader(watched, args.reload_interval).start()
        hosts = args.allowed_hosts or os.environ.get("CRAG_ALLOWED_HOSTS")
        access = Access.for_server(args.host, serve_key(args), hosts, keys)
        app = create_app(runners, infos, read_timeout=args.read_timeout, access=access)
        _log_to_stderr()
        print(f"serving {', '.join(runners)} on http://{args.host}:{args.port}  (page: /  API: /docs  "
              "chat: /v1  health: /healthz)", file=sys.stderr, flush=True)
        uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=5,
                                      http=guarded_protocol(args.read_timeout))).run(sockets=[sock])
    finally:
        if reloader is not None:
            reloader.stop()
        sock.close()
    return 0


def _keys(path: str | None, names: list[str]) -> KeysFile | None:
    """The keys file at ``path`` (None: none), read now; a knowledge base it names that the
    server does not serve is said in one warning line (its keys reach nothing there).

    Raises:
        SetupError: the file is missing or invalid (one line naming it and the entry)."""
    if path is None:
        return None
    try:
        keys = KeysFile(path)
    except KeysFileError as exc:
        raise SetupError(f"--keys: {exc}") from None
    named = {kb for p in keys.keys().values() for kb in p.scopes or {}}
    if unknown := sorted(named - set(names)):
        log.warning("--keys %s names knowledge bases this server does not serve: %s", path, ", ".join(unknown))
    return keys


def _load(args, config, name: str, limiter=None):
    """The runner on the loaded program of the knowledge base ``name`` (sharing ``limiter``), and
    ``describe(program) -> dict``: what ``/healthz`` says of a program of it (names, no paths)."""
    program = build_program_from_flags(args, config, decide_retrieval=True)  # requests may turn it off
    location = resources.kb_location(args.kb)
    report_left_out(location, getattr(program, "knowledge_base", None))
    lm = configure_lm(args.model, args.api_base, cache=not args.no_cache)
    embedded = (args.model or os.environ.get("CRAG_LM") or "embedded-1.5b") in EMBEDDED_MODELS
    decide = bool(args.decide_retrieval or env_flag("CRAG_DECIDE_RETRIEVAL"))
    runner = QuestionRunner(program, lm, concurrency=args.concurrency or (1 if embedded else 8),
                            max_queue=args.max_queue, timeout=args.timeout, decide_retrieval=decide,
                            sinks=[JsonlTrace(args.trace_jsonl)] if args.trace_jsonl else [], limiter=limiter,
                            name=name, audit_questions=args.audit_questions)
    program.knowledge_base.search("warm up", 1)  # load the embedder now, not in the first question

    def describe(program) -> dict:
        kb = program.knowledge_base
        manifest = kb.manifest or {}
        return {"lm": model_name(lm), "embedded_lm": embedded,
                "knowledge_base": {"name": _kb_name(location), "model": name, "chunks": len(kb),
                                   "documents": manifest.get("documents"),
                                   "built": manifest.get("updated") or manifest.get("created"), "reloads": 0},
                "compiled": _compiled_info(args), "web": runner.web,
                "thresholds": {"lower": program.settings.lower, "upper": program.settings.upper},
                "judges": program.judges_report() if hasattr(program, "judges_report") else {}}

    return runner, describe
