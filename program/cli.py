"""Command line: ``python -m program ask "question"`` and ``python -m program index PATH``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m program", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer one question with CRAG")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    ask.add_argument("--model", help="embedded-1.5b (default), embedded-0.5b, or a DSPy model string; env CRAG_LM")
    ask.add_argument("--api-base", help="base URL of a served model; env CRAG_API_BASE")
    ask.add_argument("--kb", help="corpus file or folder to answer from (default: the PopQA knowledge base)")
    ask.add_argument("--web", default="snapshot", help="web backend for the corrective path: snapshot (default) or none")
    ask.add_argument("--compiled", default=None, help="compiled program folder (default: compiled/ when present)")
    ask.add_argument("-k", type=int, default=None, help="passages retrieved and graded")
    index = sub.add_parser("index", help="build (or reuse) a knowledge base index over PATH")
    index.add_argument("path")
    index.add_argument("--out", help="index folder (default: in the cache folder)")
    return parser


def _ask(args) -> int:
    from program import resources
    from program.compiled import COMPILED_DIR, has_compiled, load_compiled
    from program.crag import CRAG, QuestionError, validate_question
    from program.lm import configure_lm

    try:  # before loading anything heavy
        validate_question(args.question)
    except QuestionError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_lm(args.model, args.api_base)
    kb = resources.knowledge_base(args.kb)
    settings = {"k": args.k} if args.k else {}
    compiled = Path(args.compiled) if args.compiled else COMPILED_DIR
    if has_compiled(compiled):
        program = load_compiled(compiled, knowledge_base=kb, web=args.web, **settings)
    else:
        if args.compiled:
            print(f"error: no compiled program in {compiled}", file=sys.stderr)
            return 2
        print("note: no compiled program found; using the uncompiled signatures", file=sys.stderr)
        program = CRAG(kb, web=resources.web_backend(args.web), embedder=resources.embedder(), **settings)
    result = program(question=args.question)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0
    print(result.answer)
    print(f"\naction: {result.action.value}  confidence: {result.confidence:.2f}  fallback: {result.fallback}")
    for c in result.citations:
        print(f"[{c.number}] {c.source_id} {c.url}".rstrip())
    t = result.trace
    print(f"LM calls: {t.lm_calls}  tokens: {t.prompt_tokens}+{t.completion_tokens}  seconds: {t.seconds:.1f}")
    return 0


def _index(args) -> int:
    from program import resources
    from program.retrieval import CorpusError

    try:
        kb = resources.knowledge_base(args.path, args.out)
    except (CorpusError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or resources.index_dir_for(Path(args.path))
    print(f"indexed {len(kb)} chunks from {args.path} into {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return _ask(args) if args.command == "ask" else _index(args)
