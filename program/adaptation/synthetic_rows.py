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

Every row group is named by its question (or, for support rows, its document) and traced to the
corpus file it came from (``SourcePairs.files``), so that after a change to a few files the rows of
the others are kept and only those files give rows again (``files``; ``program.adaptation.own_rows``).
A subset takes its share of the heading questions and support sentences a whole build samples.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from pathlib import Path

from program.adaptation.fit import SourcePairs
from program.adaptation.pairs import Pairs, adversarial_strip_pairs, synthetic_support_pairs
from program.judgments.features import cue_pairs
from program.judgments.passage import passage_features
from program.judgments import judged_text
from program.stages.refine import decompose
from program.types import Passage

TOP_K = 8
NEGATIVE_RANK = 4  # 0-based: ranked 5 and below


def heading_questions(kb, max_questions: int = 300, seed: int = 0, keep=None) -> list[tuple[str, object]]:
    """``(question, chunk)`` for the first chunk of each section whose heading has 2+ words (a page's
    first section is headed by its title), at most ``max_questions`` of them (seeded sample).

    ``keep``: a test on a chunk; only its sections are asked, in the share of all sections that
    ``max_questions`` is (at least one when any is kept)."""
    first: dict[tuple[str, str], object] = {}
    for chunk in kb.chunks:
        heading = (chunk.heading or "").strip()
        if len(heading.split()) >= 2 and (chunk.doc_id, heading) not in first:
            first[(chunk.doc_id, heading)] = chunk
    pairs = [(h, c) for (_, h), c in first.items()]
    random.Random(seed).shuffle(pairs)
    if keep is None:
        return pairs[:max_questions]
    share = min(1.0, max_questions / len(pairs)) if pairs else 0.0
    kept = [(h, c) for h, c in pairs if keep(c)]
    return kept[:math.ceil(share * len(kept))]


def corpus_file(chunk, root: str) -> str:
    """The corpus file ``chunk`` came from, as the manifest's ``files`` names it (relative to the
    indexed folder ``root``; the file's name for a single-file corpus)."""
    path = Path(chunk.source_path or chunk.doc_id)
    if not root or path == Path(root):
        return path.name
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.name


def _group(question: str, chunk_id: str) -> str:
    """A row group named by its question and source chunk, the same in every build."""
    return "syn-" + hashlib.sha256(f"{question}\n{chunk_id}".encode()).hexdigest()[:12]


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
                    log=print, files=None) -> SourcePairs:
    """The knowledge base's own training rows (see the module docstring) as one ``SourcePairs``,
    each row group traced to its corpus file (``SourcePairs.files``).

    Args:
        name: a name for the source (``"<kb name> (documents)"`` in figures).
        kb: a ``program.retrieval.KnowledgeBase`` (its ``chunks`` are read, its index searched).
        embedder: the all-MiniLM-L6-v2 embedder.
        max_questions: heading questions asked at most (over the whole knowledge base).
        written: rows of ``program.adaptation.lm_questions.write_questions`` (the kept ones are asked too,
            their answers labeling strips), or None.
        files: only the rows of these corpus files (their share of the sampled questions and
            support sentences); None: every file.

    Raises:
        ValueError: the knowledge base has neither a section heading of two or more words nor a
            kept written question (among ``files``, when given)."""
    chunks = kb.chunks
    root = str((kb.manifest or {}).get("source_path") or "")
    wanted = (lambda c: corpus_file(c, root) in files) if files is not None else None
    by_id = {c.chunk_id: c for c in chunks}
    asked = [(q, c, None) for q, c in heading_questions(kb, max_questions, seed, keep=wanted)]
    asked += [(r["question"], by_id[r["chunk_id"]], r.get("answer_sentence") or r["answer"]) for r in written or []
              if r.get("kept") and r["chunk_id"] in by_id and (wanted is None or wanted(by_id[r["chunk_id"]]))]
    if not asked and files is None:
        raise ValueError(f"{name}: no section heading of two or more words and no written question to ask")
    passage, expected, strip_rows, origin = _question_rows(kb, asked, seed, root)
    strip = adversarial_strip_pairs(strip_rows, embedder)
    support, support_origin = _support_rows(chunks, root, wanted, embedder, seed)
    kept = sum(1 for g in expected if not g.endswith("-out"))
    log(f"{name}: {kept} of {len(asked)} questions kept (source chunk ranked first); "
        f"{len(passage)} passage, {len(strip)} strip, {len(support)} support rows")
    return SourcePairs(name, kb, passage, strip, support, expected, support_weight=1.0,
                       counts={"asked": len(asked), "kept": kept}, files={**origin, **support_origin})


def _question_rows(kb, asked: list, seed: int, root: str) -> tuple[Pairs, dict, list, dict]:
    """``(passage pairs, group -> expected action, strip rows, group -> corpus file)`` of the
    ``asked`` ``(question, source chunk, answer or None)``, kept when retrieval ranks the source first."""
    results = kb.search_batch([q for q, _, _ in asked], TOP_K) if asked else []
    passage, expected, strip_rows, origin = Pairs(), {}, [], {}
    for (question, chunk, answer), hits in zip(asked, results):
        if not hits or hits[0].id != chunk.chunk_id:  # ARES: keep a question retrieval answers from its source
            continue
        group = _group(question, chunk.chunk_id)
        out_group = f"{group}-out"
        origin[group] = origin[out_group] = corpus_file(chunk, root)
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
            row = _strips(question, hits[0], others[0], answer, group, seed + int(group[4:], 16) % 1_000_003)
            if row:
                strip_rows.append(row)
    return passage, expected, strip_rows, origin


SUPPORT_SENTENCES = 400  # source sentences of the support rows, over the whole knowledge base


def _support_rows(chunks, root: str, wanted, embedder, seed: int) -> tuple[Pairs, dict]:
    """MiniCheck support rows from the documents (of the chunks ``wanted`` keeps, their share of
    ``SUPPORT_SENTENCES``), and document -> corpus file."""
    texts, origin = defaultdict(list), {}
    for c in chunks:
        if wanted is None or wanted(c):
            texts[c.doc_id].append(c.text)
            origin[c.doc_id] = corpus_file(c, root)
    share = sum(len(t) for t in texts.values()) / max(1, len(chunks))
    limit = SUPPORT_SENTENCES if wanted is None else math.ceil(SUPPORT_SENTENCES * share)
    support = synthetic_support_pairs([(d, "\n".join(t)) for d, t in sorted(texts.items())], embedder, limit=limit,
                                      seed=seed) if texts else Pairs(cues=None)
    return support, origin


__all__ = ["corpus_file", "document_source", "heading_questions"]
