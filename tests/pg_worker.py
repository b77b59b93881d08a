"""Worker processes of the concurrency test (tests/test_pgvector_concurrency.py).

``python -m tests.pg_worker answer URL OUT STOP``: answer "Who founded Acme Rockets?" with CRAG
(fake LM, no web) from the pgvector knowledge base at URL, again and again until the file STOP
exists, then once more; each answer's citations and a direct top-3 search go to OUT as JSON lines.

``python -m tests.pg_worker reindex URL CORPUS N``: N times, write the next edition of
CORPUS/acme.md and index CORPUS into URL; one JSON line per run on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

QUESTION = "Who founded Acme Rockets?"


def acme(edition: int) -> str:
    """acme.md of an edition: three sections (three chunks), each naming the edition."""
    year = 1998 + edition
    return (f"# Acme Rockets\n\n## Founding\n\nAcme Rockets was founded by Jane Roe in {year}. "
            f"This is edition {edition} of the company history.\n\n"
            f"## Rockets\n\nIn edition {edition}, Acme Rockets builds sounding rockets for university teams.\n\n"
            f"## Launch site\n\nIn edition {edition}, Acme Rockets launches from a field in Ohio.\n")


def answer(url: str, out: str, stop: str) -> None:
    import dspy

    from program.retrieval import KnowledgeBase
    from program.stages.crag import CRAG
    from tests.conftest import default_rules
    from tests.fake_lm import FakeLM

    dspy.configure(lm=FakeLM(default_rules()))
    kb = KnowledgeBase.connect(url)
    crag = CRAG(kb, web=None, embedder=kb.embedder)
    with open(out, "a", encoding="utf-8") as fh:
        last = False
        while True:
            last = last or os.path.exists(stop)
            t0 = time.time()
            result = crag(question=QUESTION)
            hits = kb.search(QUESTION, k=3)
            fh.write(json.dumps({"t0": t0, "t1": time.time(), "answer": result.answer,
                                 "citations": [[c.source_id, c.text] for c in result.citations],
                                 "hits": [[p.id, p.text] for p in hits]}) + "\n")
            fh.flush()
            if last:
                break
    kb.close()


def reindex(url: str, corpus: str, runs: int) -> None:
    from program.retrieval.postgres import PgVectorKnowledgeBase

    for i in range(runs):
        edition = 2 + i % 2  # 2, 3, 2, 3...
        (Path(corpus) / "acme.md").write_text(acme(edition), encoding="utf-8")
        t0 = time.time()
        with PgVectorKnowledgeBase.build(corpus, url) as kb:
            r = kb.last_ingest
        print(json.dumps({"edition": edition, "t0": t0, "t1": time.time(), "published": r.published,
                          "embedded": r.embedded}), flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    answer(*args) if command == "answer" else reindex(args[0], args[1], int(args[2]))
