"""Throughput of ``python -m program serve``: requests per minute and p50 / p90 latency per number
of concurrent clients.

By default it measures the service's own overhead: the fake LM (``tests/served_fake_lm.py``,
the test suite's deterministic rules) served like an OpenAI-compatible server with a fixed
delay per call, and a two-document knowledge base, so that every question costs the same
LM calls (five) and the rest is the service. With ``--model embedded-1.5b`` (or
``embedded-0.5b``) it serves the embedded model with the committed compile on the PopQA
knowledge base and asks PopQA dev questions instead.

    python -m experiments.bench_service                                   # fake LM, 50 ms a call, 1/4/16 clients
    python -m experiments.bench_service --model embedded-1.5b --clients 1,4 --requests 8

The service runs with ``--no-cache``: every LM call is made. Each client sends ``POST /ask``
requests one after another; a level ends when ``--requests``
questions (per level, default 4 per client, at least 8) are answered. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _questions(embedded: bool, n: int, level: int) -> list[str]:
    if not embedded:
        return [f"Who founded Acme Rockets? (level {level}, request {i})" for i in range(n)]
    from optimize.eval_data import load_set

    rows = load_set("popqa", limit=n, seed=0)
    return [rows[i % len(rows)]["question"] for i in range(n)]


def run_level(base: str, clients: int, questions: list[str], timeout: float) -> dict:
    """Ask ``questions`` with ``clients`` concurrent clients; return the level's figures."""
    import httpx

    latencies: list[float] = []
    errors = 0

    def one(question: str) -> None:
        nonlocal errors
        started = time.perf_counter()
        try:
            ok = httpx.post(f"{base}/ask", json={"question": question}, timeout=timeout).status_code == 200
        except httpx.HTTPError:
            ok = False
        if ok:
            latencies.append(time.perf_counter() - started)
        else:
            errors += 1

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, questions))
    wall = time.perf_counter() - started
    return {"clients": clients, "requests": len(questions), "errors": errors,
            "per_minute": 60 * len(latencies) / wall if wall else 0.0,
            "p50": statistics.median(latencies) if latencies else float("nan"),
            "p90": _percentile(latencies, 0.9) if latencies else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_service", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="embedded-1.5b or embedded-0.5b; default: the served fake LM")
    parser.add_argument("--delay", type=float, default=0.05, help="the fake LM's seconds per call (default 0.05)")
    parser.add_argument("--clients", default="1,4,16", help="concurrent clients per level (default 1,4,16)")
    parser.add_argument("--requests", type=int, default=None,
                        help="questions per level (default 4 per client, at least 8)")
    parser.add_argument("--concurrency", type=int, default=None, help="the service's --concurrency (default: its own)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request before it counts as an error")
    args = parser.parse_args(argv)
    levels = [int(c) for c in args.clients.split(",")]
    embedded = bool(args.model)

    import httpx

    from tests.service_process import ServiceProcess, program_env, write_docs

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        lm_server = None
        if embedded:
            serve_args = ["--model", args.model, "--web", "snapshot", "--no-cache"]
            env = program_env(tmp / "unused")
            env.pop("CRAG_CACHE_DIR")  # the usual cache: the model file and the PopQA index
            if os.environ.get("CRAG_CACHE_DIR"):
                env["CRAG_CACHE_DIR"] = os.environ["CRAG_CACHE_DIR"]
            label = f"{args.model}, committed compile, PopQA knowledge base"
        else:
            from tests.served_fake_lm import start

            lm_server = start(delay=args.delay)
            serve_args = ["--model", "openai/fake", "--api-base", lm_server.base, "--kb", str(write_docs(tmp / "docs")),
                          "--compiled", "none", "--web", "none", "--no-cache", "--concurrency", str(max(levels))]
            env = program_env(tmp / "cache")
            label = f"served fake LM, {args.delay * 1000:g} ms per call, 5 calls per question"
        if args.concurrency:
            serve_args += ["--concurrency", str(args.concurrency)]
        service = ServiceProcess(serve_args, env, tmp / "serve.log", startup=900)
        try:
            health = httpx.get(f"{service.base}/healthz").json()
            print(f"{label}; service concurrency {health['queue']['concurrency']}\n")
            print("| clients | requests | requests/min | p50 s | p90 s | errors |\n|---|---|---|---|---|---|")
            for clients in levels:
                n = args.requests or max(8, 4 * clients)
                row = run_level(service.base, clients, _questions(embedded, n, clients), args.timeout)
                print(f"| {row['clients']} | {row['requests']} | {row['per_minute']:.1f} | {row['p50']:.3f} | "
                      f"{row['p90']:.3f} | {row['errors']} |", flush=True)
        finally:
            service.stop()
            if lm_server is not None:
                lm_server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
