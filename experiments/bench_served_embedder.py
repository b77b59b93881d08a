"""Throughput of the served embedder (``program/retrieval/served_embedder.py``): chunks embedded a
second against the number of requests in flight.

The server is the fake one of the tests (``tests/served_fake_embedder.py``) in its own process,
answering every batch after a fixed delay (default 100 ms for a batch of 32, the embedder's
default, 384 numbers a vector as all-MiniLM-L6-v2's), so the figure measures the client (batching, the requests in
flight, reading the JSON, normalising), not this machine's speed at embedding. The ideal is
``concurrency x batch / delay`` chunks a second; the client should come near it until its own
work (mostly decoding the JSON answers, under Python's GIL: the last column) takes as long as the wait.

    python -m experiments.bench_served_embedder                            # 1, 2, 4, 8, 16 in flight
    python -m experiments.bench_served_embedder --delay 0.05 --chunks 4096

Each level embeds ``--chunks`` texts (default 2,048: 64 batches) of about 40 words with a fresh
client (its dimension probe made before the clock starts), after one warm-up pass that lets the
server keep its answers (so it only waits). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import socket
import subprocess
import sys
import time
from pathlib import Path

from program.retrieval.embedder_spec import BATCH
from program.retrieval.served_embedder import ServedEmbedder

ROOT = Path(__file__).resolve().parent.parent
WORDS = ("the river flows through ten countries and the company builds small sounding rockets for "
         "universities while the committee meets every spring to review its budget and plans").split()


def _chunks(n: int) -> list[str]:
    """``n`` distinct texts of about 40 words, like a chunk of 200 tokens cut short."""
    return [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(40)) + f" chunk {i}" for i in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(delay: float, dims: int) -> tuple[subprocess.Popen, str]:
    """The fake server in its own process (its JSON work off this one's interpreter); ``(process, base URL)``."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "tests.served_fake_embedder", "--port", str(port),
                                "--delay", str(delay), "--dims", str(dims)], cwd=ROOT, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}/v1"
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError("the fake embeddings server did not start in 30 s")


def run_level(base: str, concurrency: int, texts: list[str], batch: int) -> dict:
    """Embed ``texts`` with ``concurrency`` requests in flight; the level's figures."""
    embedder = ServedEmbedder(base, "fake", batch_size=batch, concurrency=concurrency).load()
    started, cpu = time.perf_counter(), time.process_time()  # this process only: the server runs in its own
    vectors = embedder.encode(texts)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    embedder.close()
    assert vectors.shape[0] == len(texts)
    return {"concurrency": concurrency, "seconds": seconds, "rate": len(texts) / seconds,
            "cpu_per_batch": cpu / math.ceil(len(texts) / batch)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench_served_embedder",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", default="1,2,4,8,16", help="requests in flight, comma-separated")
    parser.add_argument("--chunks", type=int, default=2048, help="texts embedded per level (default 2048)")
    parser.add_argument("--batch", type=int, default=BATCH, help=f"texts per request (default {BATCH}, the embedder's)")
    parser.add_argument("--delay", type=float, default=0.1, help="the server's seconds per batch (default 0.1)")
    parser.add_argument("--dims", type=int, default=384, help="numbers per vector (default 384)")
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.levels.split(",")]
    texts = _chunks(args.chunks)
    process, base = start_server(args.delay, args.dims)
    try:
        run_level(base, max(levels), texts, args.batch)  # warm-up: the server keeps its answers, then only waits
        rows = [run_level(base, c, texts, args.batch) for c in levels]
    finally:
        process.terminate()
        process.wait(10)
    print(f"{args.chunks} chunks, {args.batch} a request, the server answering each after {args.delay * 1000:g} ms "
          f"with {args.dims}-number vectors\n")
    print("| requests in flight | seconds | chunks / s | ideal (in flight x batch / delay) | share of ideal "
          "| client CPU ms / batch |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        rounds = math.ceil(math.ceil(args.chunks / args.batch) / r["concurrency"])  # of batches in flight at once
        ideal = args.chunks / (rounds * args.delay)
        print(f"| {r['concurrency']} | {r['seconds']:.2f} | {r['rate']:,.0f} | {ideal:,.0f} | "
              f"{r['rate'] / ideal:.0%} | {r['cpu_per_batch'] * 1000:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
