"""Questions the LM writes for a knowledge base's own chunks, kept the ARES way (Saad-Falcon et al. 2024, §3.1).

For sampled chunks the LM (``WriteQuestion``) writes a question a reader would ask and copies its
answer from the chunk. A question is kept when the chunk holds its answer (word for word, or, since
the 1.5B model paraphrases, a strip holding half its content words) and the embedder ranks the chunk
first for it ("filtered by whether the retriever returns the source passage"). The kept rows
feed ``program.adaptation.synthetic_rows.document_source`` beside the heading questions, and, with their
answer, label strips the FILCO way (the strip holding the answer is relevant).

Writing is time-boxed (``time_cap`` seconds) and cached per knowledge base in
``<cache>/questions-<corpus key>.jsonl``: a rerun with unchanged documents asks nothing.
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path

import dspy
from tqdm import tqdm

from program.atomic import write_atomic
from program.judges.store import corpus_key
from program.lm.model_files import cache_root
from program.retrieval.progress import progress_enabled
from program.stages.refine import decompose
from program.text import words
from program.types import Passage
from signatures import WriteQuestion

MIN_WORDS = 30


def _normalise(text: str) -> str:
    return " ".join("".join(ch for ch in text if ch not in "*_`").casefold().split())


def answer_sentence(chunk_text: str, answer: str) -> str | None:
    """The chunk's strip that holds ``answer``: the one containing it word for word, else the one
    holding at least half of its first 20 content words (a small LM paraphrases its answer), or None."""

    strips = [s.text for s in decompose(Passage(id="chunk", text=chunk_text))]
    exact = [t for t in strips if _normalise(answer) in _normalise(t)]
    if exact:
        return exact[0]
    wanted = [w for w in words(answer) if len(w) > 3][:20]
    if not wanted or not strips:
        return None
    best = max(strips, key=lambda t: sum(w in set(words(t)) for w in wanted))
    return best if sum(w in set(words(best)) for w in wanted) >= len(wanted) / 2 else None


def judge_row(kb, chunk, question: str, answer: str) -> dict:
    """One written question, kept the ARES way: the embedder ranks its chunk first and the chunk holds
    its answer (``answer_sentence``)."""
    sentence = answer_sentence(chunk.text, answer) if question and answer else None
    top = kb.search(question, 1) if question else []
    kept = bool(sentence and top and top[0].id == chunk.chunk_id)
    return {"chunk_id": chunk.chunk_id, "question": question, "answer": answer, "answer_sentence": sentence,
            "kept": kept}


def sample_chunks(kb, n: int, seed: int = 0) -> list:
    """Up to ``n`` chunks of ``MIN_WORDS`` words or more, at most one per document first (seeded)."""
    rng = random.Random(seed)
    chunks = [c for c in kb.chunks if len(c.text.split()) >= MIN_WORDS]
    rng.shuffle(chunks)
    seen, first, rest = set(), [], []
    for c in chunks:
        (rest if c.doc_id in seen else first).append(c)
        seen.add(c.doc_id)
    return (first + rest)[:n]


def cache_path(kb, cache_dir: str | Path | None = None) -> Path:
    """Where the written questions of ``kb`` are kept (``$CRAG_CACHE_DIR`` or ``.cache``)."""
    root = Path(cache_dir) if cache_dir else cache_root()
    return root / "synthetic" / f"questions-{corpus_key(kb)}.jsonl"


def write_questions(kb, n: int = 40, time_cap: float = 600.0, seed: int = 0, cache_dir=None, log=print,
                    progress: bool = True) -> list[dict]:
    """Written and filtered questions for ``kb``: dicts ``question``, ``answer``, ``answer_sentence``,
    ``chunk_id``, ``kept`` (``judge_row``).

    Uses DSPy's configured LM. Stops asking after ``time_cap`` seconds (what was written is kept).
    Rows already in the cache are not asked again; the cache is rewritten atomically after each row.
    ``progress``: a bar of questions written on stderr (on a terminal, or with ``CRAG_PROGRESS=1``).

    Raises:
        whatever the LM raises (an unreachable served model): a question the LM cannot write is a
        failure of the run, not a row."""
    path = cache_path(kb, cache_dir)
    done = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                done[row["chunk_id"]] = row
    writer = dspy.Predict(WriteQuestion)
    started = time.perf_counter()
    todo = [c for c in sample_chunks(kb, n, seed) if c.chunk_id not in done]
    bar = tqdm(total=len(todo), desc="writing questions", unit="question", file=sys.stderr,
               disable=not (progress and todo and progress_enabled()))
    for chunk in todo:
        if time.perf_counter() - started > time_cap:
            log(f"question writing stopped at its time cap ({time_cap:.0f} s)")
            break
        title = f"{chunk.title} / {chunk.heading}" if chunk.heading and chunk.heading != chunk.title else chunk.title
        out = writer(title=title or chunk.doc_id, passage=chunk.text)
        question, answer = str(out.question or "").strip(), str(out.answer or "").strip()
        done[chunk.chunk_id] = judge_row(kb, chunk, question, answer)
        _save(path, list(done.values()))
        bar.update(1)
    bar.close()
    rows = list(done.values())
    log(f"{sum(r['kept'] for r in rows)} of {len(rows)} written questions kept "
        f"(answer in its chunk, chunk ranked first) in {time.perf_counter() - started:.0f} s")
    return rows


def _save(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


__all__ = ["answer_sentence", "cache_path", "judge_row", "sample_chunks", "write_questions"]
