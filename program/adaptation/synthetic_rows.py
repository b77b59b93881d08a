"""Training rows a knowledge base gives of itself, with no hand labels (ARES's recipe, first step).

ARES (Saad-Falcon et al. 2024, §3.1-3.2) adapts its judges to a domain from questions written for the
domain's own passages: a question is kept when retrieval ranks its source passage first; the source
passage is a positive, passages ranked 5 and below and other documents' passages are negatives.
MiniCheck (Tang et al. 2024, §3) makes support rows from a corpus's sentences by perturbing them.

This module builds those rows for any knowledge base from its *free* questions, a section's heading
("Container restart policy", "How long refunds take") asked of the whole knowledge base, and from the
questions the LM wrote for its chunks (``program.adaptation.lm_questions``), whose answers label strips.

* passage rows: each kept heading question against its top-8 chunks: its source chunk relevant,
  other documents' chunks and every chunk ranked 5 or lower not relevant (the source document's
  other chunks ranked 2-4 are left out: they may answer too); expected action ``correct``;
* "not covered" rows: the same question with its source document left out of the results (its top
  5 chunks of other documents, none relevant); expected action ``incorrect``;
* strip rows: for a heading question up to 3 strips of the source chunk (relevant) beside up to 3
  strips of the best chunk of another document; for a written question the strips holding its answer
  (relevant, as FILCO labels them) beside 2 other strips of its chunk and 2 of another document;
* support rows: ``pairs.synthetic_support_pairs`` over the knowledge base's documents.

"""

from __future__ import annotations

import random
from collections import defaultdict

from program.adaptation.fit import SourcePairs
from program.adaptation.pairs import Pairs, adversarial_strip_pairs, synthetic_support_pairs
from program.judges.features import cue_pairs, passage_features
from program.judges.judgments import judged_text
from program.stages.refine import decompose
from program.types import Passage

TOP_K = 8
NEGATIVE_RANK = 4  # 0-based: ranked 5 and below


def heading_questions(kb, max_questions: int = 300, seed: int = 0) -> list[tuple[str, object]]:
    """``(question, chunk)`` for the first chunk of each section whose heading has 2+ words (a page's
    first section is headed by its title), at most ``max_questions`` of them (seeded sample)."""
    first: dict[tuple[str, str], object] = {}
    for chunk in kb.chunks:
        heading = (chunk.heading or "").strip()
        if len(heading.split()) >= 2 and (chunk.doc_id, heading) not in first:
            first[(chunk.doc_id, heading)] = chunk
    pairs = [(h, c) for (_, h), c in first.items()]
    random.Random(seed).shuffle(pairs)
    return pairs[:max_questions]


def _doc(chunk_id: str) -> str:
    return chunk_id.rpartition("#")[0]


def _strips(question: str, own_chunk: Passage, other_chunk: Passage, answer: str | None, group: str, seed: int):
    """A strip row: with an answer, its source strips holding it (relevant, FILCO) beside up to 2 that do
    not and 2 of another document; without one, up to 3 source strips (relevant) beside 3 others."""
    own = [s.text for s in decompose(own_chunk)]
    other = [s.text for s in decompose(other_chunk)]
    if answer:  # the answer, or the strip holding it
        holding = [t for t in own if answer.casefold() in t.casefold() or t.casefold() in answer.casefold()][:2]
        if not holding:
            return None
        strips, relevant = holding + [t for t in own if t not in holding][:2] + other[:2], len(holding)
    else:
        strips, relevant = own[:3] + other[:3], min(3, len(own))
    if not relevant or not 3 <= len(strips) <= 6:
        return None
    order = list(range(len(strips)))
    random.Random(seed).shuffle(order)
    return {"id": group, "question": question, "strips": [strips[j] for j in order],
            "relevant": [n + 1 for n, j in enumerate(order) if j < relevant]}


def document_source(name: str, kb, embedder, max_questions: int = 300, seed: int = 0, written=None,
                    log=print) -> SourcePairs:
    """The knowledge base's own training rows (see the module docstring) as one ``SourcePairs``.

    Args:
        name: a name for the source (``"<kb name> (documents)"`` in figures).
        kb: a ``program.retrieval.KnowledgeBase`` (its ``chunks`` are read, its index searched).
        embedder: the all-MiniLM-L6-v2 embedder.
        max_questions: heading questions asked at most.
        written: rows of ``program.adaptation.lm_questions.write_questions`` (the kept ones are asked too,
            their answers labeling strips), or None.

    Raises:
        ValueError: the knowledge base has neither a section heading of two or more words nor a
            kept written question."""
    by_id = {c.chunk_id: c for c in kb.chunks}
    asked = [(q, c, None) for q, c in heading_questions(kb, max_questions, seed)]
    asked += [(r["question"], by_id[r["chunk_id"]], r.get("answer_sentence") or r["answer"]) for r in written or []
              if r.get("kept") and r["chunk_id"] in by_id]
    if not asked:
        raise ValueError(f"{name}: no section heading of two or more words and no written question to ask")
    results = kb.search_batch([q for q, _, _ in asked], TOP_K)
    passage, expected, strip_rows = Pairs(), {}, []
    kept = 0
    for i, ((question, chunk, answer), hits) in enumerate(zip(asked, results)):
        if not hits or hits[0].id != chunk.chunk_id:  # ARES: keep a question retrieval answers from its source
            continue
        kept += 1
        group, out_group = f"syn-{i}", f"syn-out-{i}"
        source_doc = chunk.doc_id
        for rank, p in enumerate(hits):
            same_doc = _doc(p.id) == source_doc
            if rank == 0 or not same_doc or rank >= NEGATIVE_RANK:
                passage.add(passage_features(question, p.text, p.score), cue_pairs(question, p.text),
                            rank == 0, group, text=(question, judged_text(p)))
        expected[group] = "correct"
        others = [p for p in hits if _doc(p.id) != source_doc][:5]
        for p in others:  # the question asked with its source document left out of the index
            passage.add(passage_features(question, p.text, p.score), cue_pairs(question, p.text), 0, out_group,
                        text=(question, judged_text(p)))
        if others:
            expected[out_group] = "incorrect"
            row = _strips(question, hits[0], others[0], answer, group, seed + i)
            if row:
                strip_rows.append(row)
    strip = adversarial_strip_pairs(strip_rows, embedder)
    texts = defaultdict(list)
    for c in kb.chunks:
        texts[c.doc_id].append(c.text)
    support = synthetic_support_pairs([(d, "\n".join(t)) for d, t in sorted(texts.items())], embedder, seed=seed)
    log(f"{name}: {kept} of {len(asked)} questions kept (source chunk ranked first); "
        f"{len(passage)} passage, {len(strip)} strip, {len(support)} support rows")
    return SourcePairs(name, kb, passage, strip, support, expected, support_weight=1.0,
                       counts={"asked": len(asked), "kept": kept})


__all__ = ["document_source", "heading_questions"]
