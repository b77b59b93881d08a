"""Command line: ``python -m program ask "question"`` and ``python -m program index PATH``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from program.web.config import BACKEND_NAMES


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m program", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    ask = sub.add_parser("ask", help="answer one question with CRAG")
    ask.add_argument("question")
    ask.add_argument("--json", action="store_true", help="print the whole result as JSON")
    ask.add_argument("--model", help="embedded-1.5b (default), embedded-0.5b, or a DSPy model string; env CRAG_LM")
    ask.add_argument("--api-base", help="base URL of a served model; env CRAG_API_BASE")
    ask.add_argument("--kb", help="corpus file or folder to answer from, or a pgvector knowledge base "
                                  "postgresql://user@host:port/db?table=NAME; env CRAG_KB (default: the PopQA knowledge base)")
    ask.add_argument("--web", default=None, choices=BACKEND_NAMES, metavar="NAME",
                     help=f"web backend for the corrective path: {', '.join(BACKEND_NAMES)}; env CRAG_WEB "
                          "(default snapshot, offline)")
    ask.add_argument("--searx-url", help="SearXNG base URL for --web searxng; env SEARXNG_URL")
    ask.add_argument("--web-allow", help="comma-separated domains the web path may use (and their subdomains), "
                                         "e.g. wikipedia.org; env CRAG_WEB_ALLOW")
    ask.add_argument("--web-block", help="comma-separated domains the web path never uses; env CRAG_WEB_BLOCK")
    ask.add_argument("--allow-private-urls", action="store_true",
                     help="let the web path fetch loopback and private-network addresses (tests, self-hosted)")
    ask.add_argument("--compiled", default=None, help="compiled program folder (default: compiled/ when present)")
    ask.add_argument("-k", type=int, default=None, help="passages retrieved and graded")
    ask.add_argument("--decide-retrieval", action="store_true",
                     help="first ask whether the question needs sources at all; greetings, arithmetic and "
                          "rewording requests are then answered without retrieval; env CRAG_DECIDE_RETRIEVAL=1")
    index = sub.add_parser("index", help="build (or reuse) a knowledge base index over PATH")
    index.add_argument("path")
    index.add_argument("--out", help="faiss index folder (default: in the cache folder)")
    index.add_argument("--kb", help="index into this pgvector knowledge base instead, "
                                    "postgresql://user@host:port/db?table=NAME; env CRAG_KB when it is such a URL")
    return parser


def _web_backend(args):
    """The web backend the flags and environment ask for (flags win); raises WebSearchError or ValueError."""
    from program.web.config import WebConfig
    from program.web.registry import build_backend

    config = WebConfig.from_env(backend=args.web, searx_url=args.searx_url, allowed_domains=args.web_allow,
                                blocked_domains=args.web_block, allow_private=True if args.allow_private_urls else None)
    return build_backend(config)


def _ask(args) -> int:
    from program import resources
    from program.compiled import COMPILED_DIR, has_compiled, load_compiled
    from program.crag import CRAG, QuestionError, validate_question
    from program.lm import configure_lm
    from program.retrieval import CorpusError, KnowledgeBaseError
    from program.web.base import WebSearchError

    try:  # before loading anything heavy
        validate_question(args.question)
        web = _web_backend(args)
    except (QuestionError, WebSearchError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        kb = resources.knowledge_base(resources.kb_location(args.kb))
    except (CorpusError, KnowledgeBaseError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    configure_lm(args.model, args.api_base)
    settings = {"k": args.k} if args.k else {}
    if args.decide_retrieval or os.environ.get("CRAG_DECIDE_RETRIEVAL", "").lower() in ("1", "true", "yes"):
        settings["decide_retrieval"] = True
    compiled = Path(args.compiled) if args.compiled else COMPILED_DIR
    if has_compiled(compiled):
        program = load_compiled(compiled, knowledge_base=kb, web=web, **settings)
    else:
        if args.compiled:
            print(f"error: no compiled program in {compiled}", file=sys.stderr)
            return 2
        print("note: no compiled program found; using the uncompiled signatures", file=sys.stderr)
        program = CRAG(kb, web=web, embedder=resources.embedder(), **settings)
    try:
        result = program(question=args.question)
    except KnowledgeBaseError as exc:  # e.g. the database went away and stayed away
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0
    print(result.answer)
    if result.retrieval_skipped:
        print("\nretrieval skipped: the question needs no sources; answered without them")
    else:
        print(f"\naction: {result.action.value}  confidence: {result.confidence:.2f}  fallback: {result.fallback}")
    for c in result.citations:
        print(f"[{c.number}] {c.source_id} {c.url}".rstrip())
    t = result.trace
    for w in t.web:
        print(f"web ({w['backend']}): query {w['query']!r}: {len(w['hits'])} hits, {w['dropped_by_scope']} out of scope, "
              f"{len(w['fetched'])} pages fetched, {len(w['fetch_failures'])} failed" + (f"; {w['error']}" if w["error"] else ""))
    print(f"LM calls: {t.lm_calls}  tokens: {t.prompt_tokens}+{t.completion_tokens}  seconds: {t.seconds:.1f}")
    return 0


def _index(args) -> int:
    from program import resources
    from program.retrieval import CorpusError, KnowledgeBaseError
    from program.retrieval.postgres.url import is_database_url

    target = resources.kb_location(args.kb)
    try:
        if is_database_url(target):
            from program.retrieval.postgres import PgVectorKnowledgeBase

            with PgVectorKnowledgeBase.build(args.path, target) as kb:
                r = kb.last_ingest
                print(f"indexed {r.chunks} chunks from {args.path} into {kb.url}: {len(r.published)} file(s) "
                      f"updated, {r.unchanged} unchanged, {len(r.removed)} removed, {r.embedded} chunks embedded")
            return 0
        if args.kb:
            print("error: --kb for index takes a postgresql:// URL; for a folder use --out", file=sys.stderr)
            return 2
        kb = resources.knowledge_base(args.path, args.out)
    except (CorpusError, FileNotFoundError, KnowledgeBaseError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = args.out or resources.index_dir_for(Path(args.path))
    print(f"indexed {len(kb)} chunks from {args.path} into {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return _ask(args) if args.command == "ask" else _index(args)
