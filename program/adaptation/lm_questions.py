"""Questions the LM writes for a knowledge base's own chunks, kept the ARES way (Saad-Falcon et al. 2024, §3.1).

For sampled chunks the LM (``WriteQuestion``) writes a question a reader would ask and copies its
answer from the chunk. A question is kept when the chunk holds its answer (word for word, or, since
the 1.5B model paraphrases, a strip holding half its content words) and the embedder ranks the chunk
first for it ("filtered by whether the retriever returns the source passage"). The kept rows
feed ``program.adaptation.synthetic_rows.document_source`` beside the heading questions, and, with their
answer, label strips the FILCO way (the strip holding the answer is relevant).

Writing is time-boxed (``time_cap`` seconds) and kept with the knowledge base (``questions.jsonl``
in its state, ``program.judges.adapted.adapted_state``; or a cache folder): a rerun asks nothing
for chunks that are unchanged, and after a change to a few files only their share is written again.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import time
from pathlib import Path

import dspy
from tqdm import tqdm

from program.judges.store import corpus_key
from program.lm.model_files import cache_root
from program.retrieval.progress import progress_enabled
from program.state import as_state
from program.stages.refine import decompose
from program.text import words
from program.types import Passage
from signatures import WriteQuestion

MIN_WORDS = 30
QUESTIONS_FILE = "questions.jsonl"


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
            "kept": kept, "chunk_sha": text_sha(chunk.text)}


def text_sha(text: str) -> str:
    """12 hex digits naming a chunk's text: a written question stays valid while it is unchanged."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


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
    """Where questions for ``kb`` are kept without a knowledge-base state: ``<cache>/synthetic/<corpus key>``."""
    root = Path(cache_dir) if cache_dir else cache_root()
    return root / "synthetic" / corpus_key(kb)


def _still_valid(rows: list[dict], kb) -> dict[str, dict]:
    """The saved rows whose chunk ``kb`` still holds with the same text, by chunk id."""
    shas = {c.chunk_id: text_sha(c.text) for c in kb.chunks}
    # a row saved before rows named their chunk's text is taken as written for the chunk of that id
    return {r["chunk_id"]: r for r in rows if r.get("chunk_id") in shas
            and r.get("chunk_sha", shas[r["chunk_id"]]) == shas[r["chunk_id"]]}


def write_questions(kb, n: int = 40, time_cap: float = 600.0, seed: int = 0, cache_dir=None, log=print,
                    progress: bool = True, where=None) -> list[dict]:
    """Written and filtered questions for ``kb``: dicts ``question``, ``answer``, ``answer_sentence``,
    ``chunk_id``, ``kept`` (``judge_row``), ``chunk_sha``.

    Uses DSPy's configured LM. Stops asking after ``time_cap`` seconds (what was written is kept).
    Saved rows whose chunk is unchanged are not asked again: up to ``n`` of them are kept, and only
    the rest is written for newly sampled chunks. The rows are rewritten (all or nothing) after each
    one, into ``where`` (a knowledge base's state, ``program.judges.adapted.adapted_state``), else a
    folder of ``cache_dir`` (``cache_path``). ``progress``: a bar of questions written on stderr (on
    a terminal, or with ``CRAG_PROGRESS=1``).

    Raises:
        whatever the LM raises (an unreachable served model): a question the LM cannot write is a
        failure of the run, not a row."""
    state = as_state(where) if where is not None else as_state(cache_path(kb, cache_dir))
    saved = state.read(QUESTIONS_FILE)
    rows = [json.loads(line) for line in (saved or b"").decode("utf-8").splitlines() if line.strip()]
    done = dict(list(_still_valid(rows, kb).items())[:n])
    writer = dspy.Predict(WriteQuestion)
    started = time.perf_counter()
    todo = [c for c in sample_chunks(kb, n + len(done), seed) if c.chunk_id not in done][:max(0, n - len(done))]
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
        state.write(QUESTIONS_FILE, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in done.values()))
        bar.update(1)
    bar.close()
    rows = list(done.values())
    log(f"{sum(r['kept'] for r in rows)} of {len(rows)} written questions kept "
        f"(answer in its chunk, chunk ranked first) in {time.perf_counter() - started:.0f} s")
    return rows


__all__ = ["QUESTIONS_FILE", "answer_sentence", "cache_path", "judge_row", "sample_chunks", "text_sha",
           "write_questions"]
