"""``python -m program serve``: load the program once, then serve it with uvicorn."""

from __future__ import annotations

import os
import sys

import uvicorn

from program.app.compiled import COMPILED_DIR, has_compiled, read_manifest
from program.app.service.app import create_app
from program.app.service.runner import QuestionRunner
from program.app.startup import SetupError, build_program_from_flags, check_setup
from program.app.tracing import JsonlTrace
from program.env import env_flag
from program.lm.configure import configure_lm, model_name
from program.lm.model_files import EMBEDDED_MODELS


def _compiled_info(args) -> dict | None:
    if args.compiled == "none":
        return None
    folder = args.compiled or COMPILED_DIR
    if not has_compiled(folder):
        return None
    manifest = read_manifest(folder) or {}
    return {"directory": str(folder), **{k: manifest.get(k) for k in ("lm", "date", "dspy_version", "dev_score")}}


def serve(args) -> int:
    """Check the flags, load the LM, knowledge base and program, and serve until interrupted.

    Returns the exit code. Raises ``program.app.startup.SetupError`` for a bad flag, backend or corpus
    (checked before the model loads).
    """
    if args.concurrency is not None and args.concurrency < 1:
        raise SetupError(f"--concurrency must be at least 1, got {args.concurrency}")
    config = check_setup(args)
    program = build_program_from_flags(args, config, decide_retrieval=True)  # requests may turn it on or off
    lm = configure_lm(args.model, args.api_base)
    if args.no_cache:
        lm.cache = False
    embedded = (args.model or os.environ.get("CRAG_LM") or "embedded-1.5b") in EMBEDDED_MODELS
    decide = bool(args.decide_retrieval or env_flag("CRAG_DECIDE_RETRIEVAL"))
    runner = QuestionRunner(program, lm, web_config=config, concurrency=args.concurrency or (1 if embedded else 8),
                            max_queue=args.max_queue, timeout=args.timeout, decide_retrieval=decide,
                            sinks=[JsonlTrace(args.trace_jsonl)] if args.trace_jsonl else [])
    kb = program.knowledge_base
    kb.search("warm up", 1)  # load the embedder now, not in the first question
    info = {"lm": model_name(lm), "embedded_lm": embedded,
            "knowledge_base": {"source": str(args.kb or "PopQA knowledge base"), "index": str(getattr(kb, "index_dir", "")),
                               "chunks": len(kb)},
            "compiled": _compiled_info(args), "web": getattr(program.web_searcher.backend, "name", "none"),
            "thresholds": {"lower": program.lower, "upper": program.upper},
            "judges": program.judges_report() if hasattr(program, "judges_report") else {}}
    app = create_app(runner, info)
    print(f"serving on http://{args.host}:{args.port}  (page: /  API: /docs  health: /healthz)", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=5)
    return 0
