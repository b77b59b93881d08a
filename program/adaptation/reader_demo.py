"""The reader's few-shot demo, written from the knowledge base's own documents.

The compiled reader (``GenerateAnswer``) holds demos from the knowledge bases it was compiled on.
On another knowledge base the 1.5B reader sometimes copies a foreign demo's answer word for word
("You have 7 calendar days from the day the dispute is opened..." given to a handbook question),
and without any demo it says the context does not answer most questions it could
(``docs/lab/2026-12-05-greedy-confidence.md``). DSPy's few-shot demos are examples of the task
on the task's own data (DSPy, Khattab et al. 2023); ``program index`` writes one for each knowledge
base from a question the LM wrote for one of its chunks, kept the ARES way (its chunk ranked
first and holding its answer, ``program.adaptation.lm_questions.judge_row``):

- *context*: up to ``CONTEXT_STRIPS`` knowledge strips of that chunk around the answering one,
  numbered as the reader sees its context;
- *answer*: the answering strip, as the compiled help-centre demo answers with its sentence.

``load_compiled`` gives the reader that demo in place of the compiled demos the knowledge base
does not hold (``held_by``). Saved as ``reader_demo.json`` in the knowledge base's state
(``program.judges.adapted.adapted_state``).
"""

from __future__ import annotations

import json

from program.stages.refine import decompose
from program.stages.scope import held_by
from program.state import as_state
from program.types import Passage

READER_DEMO_FILE = "reader_demo.json"
CONTEXT_STRIPS = 3
MAX_DEMO_WORDS = 120  # the compiled demos run 40-60 words: every draft's prompt pays for the demo


def reader_demo(kb, rows: list[dict]) -> dict | None:
    """The demo from the first kept written-question row that makes one, or None.

    Args:
        kb: the knowledge base the rows were written for (its ``chunks``).
        rows: ``program.adaptation.lm_questions.write_questions`` rows (``question``, ``answer_sentence``,
            ``chunk_id``, ``kept``).

    Returns:
        ``{"question", "context": ["[1] strip", ...], "answer", "chunk_id"}``; None when no kept
        row's answering strip is one of its chunk's strips within ``MAX_DEMO_WORDS``.
    """
    chunks = {c.chunk_id: c for c in kb.chunks}
    for row in rows:
        chunk = chunks.get(row.get("chunk_id"))
        if not row.get("kept") or chunk is None:
            continue
        strips = [s.text for s in decompose(Passage(id=chunk.chunk_id, text=chunk.text))]
        if row.get("answer_sentence") not in strips:
            continue
        at = strips.index(row["answer_sentence"])
        start = max(0, min(at - 1, len(strips) - CONTEXT_STRIPS))
        context = strips[start: start + CONTEXT_STRIPS]
        if sum(len(s.split()) for s in context) > MAX_DEMO_WORDS:
            continue
        return {"question": row["question"], "context": [f"[{n}] {s}" for n, s in enumerate(context, start=1)],
                "answer": row["answer_sentence"], "chunk_id": chunk.chunk_id}
    return None


def with_reader_demo(state: dict, kb, demo: dict) -> dict:
    """A copy of the compiled ``state`` (predictor name -> state) whose reader
    (``generator.generate``) has ``demo`` after the compiled demos ``kb`` holds (the others
    were written for other documents), so that the program is built with it."""
    reader = dict(state.get("generator.generate") or {})
    own = {"augmented": True, "question": demo["question"], "context": list(demo["context"]), "answer": demo["answer"]}
    reader["demos"] = [d for d in reader.get("demos", []) if held_by(kb, d)] + [own]
    return {**state, "generator.generate": reader}


def save_reader_demo(demo: dict, where) -> str:
    """Write ``demo`` as ``reader_demo.json`` into ``where`` (a knowledge base's state, or a
    folder), all or nothing; where it went. Raises ``OSError``."""
    state = as_state(where)
    state.write(READER_DEMO_FILE, json.dumps(demo, indent=2, ensure_ascii=False) + "\n")
    return f"{state.where}/{READER_DEMO_FILE}"


def load_reader_demo(where) -> dict | None:
    """The demo saved in ``where`` (a knowledge base's state, or a folder), or None when there is none.

    Raises:
        ValueError: the saved demo is not one (the message names it).
    """
    state = as_state(where)
    data = state.read(READER_DEMO_FILE) if state is not None else None
    if data is None:
        return None
    path = f"{state.where}/{READER_DEMO_FILE}"
    try:
        demo = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable reader demo ({exc})") from None
    if not (isinstance(demo, dict) and isinstance(demo.get("question"), str) and isinstance(demo.get("answer"), str)
            and isinstance(demo.get("context"), list) and all(isinstance(c, str) for c in demo["context"])):
        raise ValueError(f"{path}: not a reader demo (question, context, answer)")
    return demo


__all__ = ["READER_DEMO_FILE", "held_by", "load_reader_demo", "reader_demo", "save_reader_demo", "with_reader_demo"]
