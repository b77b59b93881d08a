"""The reader's demo written from a knowledge base's own documents (``program.adaptation.reader_demo``)."""

from __future__ import annotations

import json
from pathlib import Path

import dspy
import pytest

from program.adaptation.reader_demo import (MAX_DEMO_WORDS, held_by, load_reader_demo, reader_demo, save_reader_demo,
                                        with_reader_demo)
from program.types import Passage

TEXT = ("Employees accrue vacation every pay period. Full-time staff earn 15 days a year. "
        "Unused days carry over up to 40 hours. Requests go to your manager in the HR portal.")


class Chunk:
    def __init__(self, chunk_id, text):
        self.chunk_id, self.text = chunk_id, text


class KB:
    """Two chunks; ``search`` returns the one sharing most words with the query."""

    def __init__(self):
        self.chunks = [Chunk("leave.md#0", TEXT), Chunk("travel.md#0", "Book flights through the travel desk.")]

    def search(self, query, k):
        best = max(self.chunks, key=lambda c: len(set(query.lower().split()) & set(c.text.lower().split())))
        return [Passage(id=best.chunk_id, text=best.text)][:k]


def row(answer_sentence, kept=True, chunk_id="leave.md#0"):
    return {"chunk_id": chunk_id, "question": "How many vacation hours carry over?", "answer": "40 hours",
            "answer_sentence": answer_sentence, "kept": kept}


def test_the_demo_is_the_answering_strip_and_its_neighbours_numbered():
    demo = reader_demo(KB(), [row("Unused days carry over up to 40 hours.", kept=False),
                              row("Unused days carry over up to 40 hours.")])
    assert demo == {"question": "How many vacation hours carry over?",
                    "context": ["[1] Full-time staff earn 15 days a year.",
                                "[2] Unused days carry over up to 40 hours.",
                                "[3] Requests go to your manager in the HR portal."],
                    "answer": "Unused days carry over up to 40 hours.", "chunk_id": "leave.md#0"}


def test_no_demo_from_unkept_rows_unknown_chunks_or_strips_not_in_the_chunk():
    kb = KB()
    assert reader_demo(kb, [row("Unused days carry over up to 40 hours.", kept=False)]) is None
    assert reader_demo(kb, [row("Unused days carry over up to 40 hours.", chunk_id="gone.md#3")]) is None
    assert reader_demo(kb, [row("A sentence the chunk never wrote.")]) is None
    sentences = [" ".join(["word"] * 49) + f" end{i}." for i in range(4)]  # 50 words each
    kb.chunks.append(Chunk("long.md#0", " ".join(sentences)))
    assert 3 * 50 > MAX_DEMO_WORDS  # every prompt would pay for a demo this long
    assert reader_demo(kb, [row(sentences[1], chunk_id="long.md#0")]) is None


def test_the_own_demo_replaces_the_compiled_demos_the_knowledge_base_does_not_hold():
    kb = KB()
    held = {"augmented": True, "question": "How many days do full-time staff earn?", "context": ["[1] ..."],
            "answer": "Full-time staff earn 15 days a year."}
    foreign = {"augmented": True, "question": "How long do I have to respond to a dispute?", "context": ["[1] ..."],
               "answer": "You have 7 calendar days from the day the dispute is opened to submit evidence."}
    assert held_by(kb, held) and not held_by(kb, foreign)
    state = {"generator.generate": {"demos": [held, foreign], "signature": {}}, "checker.extract": {"demos": []}}
    own = reader_demo(kb, [row("Unused days carry over up to 40 hours.")])
    mixed = with_reader_demo(state, kb, own)
    assert [d["answer"] for d in mixed["generator.generate"]["demos"]] == [held["answer"], own["answer"]]
    assert mixed["checker.extract"] == {"demos": []} and mixed["generator.generate"]["signature"] == {}
    assert [d["answer"] for d in state["generator.generate"]["demos"]] == [held["answer"], foreign["answer"]]
    # the program built from that state reads them, dicts as DSPy loads every saved demo
    reader = dspy.Predict("question, context -> answer")
    reader.load_state(reader.dump_state() | {"demos": mixed["generator.generate"]["demos"]})
    assert [d["answer"] for d in reader.demos] == [held["answer"], own["answer"]]


def test_a_saved_demo_loads_and_a_broken_one_is_named(tmp_path):
    demo = reader_demo(KB(), [row("Unused days carry over up to 40 hours.")])
    assert load_reader_demo(tmp_path) is None and load_reader_demo(None) is None
    path = Path(save_reader_demo(demo, tmp_path / "adapted" / "abc"))
    assert path == tmp_path / "adapted" / "abc" / "reader_demo.json" and load_reader_demo(path.parent) == demo
    path.write_text("{not json")
    with pytest.raises(ValueError, match=rf"^{path}: unreadable reader demo"):
        load_reader_demo(path.parent)
    path.write_text(json.dumps({"question": "q", "context": "one string", "answer": "a"}))
    with pytest.raises(ValueError, match=rf"^{path}: not a reader demo \(question, context, answer\)$"):
        load_reader_demo(path.parent)
