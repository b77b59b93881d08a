"""Labeled pairs for the trained judges, from the labeled sets' training splits only.

* PopQA ``train`` questions (``eval_sets.popqa``), labeled the CRAG paper's way (§5.5): a
  retrieved passage that names the question's subject and states a gold answer is relevant;
  a namesake's passage and other questions' passages are negatives (retrieval's top hits,
  so the hard ones: same name, same relation, come first). Strips of the top passages are
  labeled the same way, a strip that starts with a pronoun being about its passage's subject;
  claims made from their answers as a generator states them.
* The labeled domains' ``train`` rows: grading rows and the queries' retrieved chunks against
  their ``relevant_chunk_ids`` (their strip and support rows: ``program.adaptation.pairs``).

``Pairs`` and the builders that read no labeled set (strip and support rows, MiniCheck's
synthetic support pairs) are ``program.adaptation.pairs``: ``program index`` uses them too.
"""

from __future__ import annotations

import random
import re
from pathlib import PurePath

import numpy as np

from program.adaptation.pairs import Pairs, support_pair_features
from program.judgments import judged_text
from program.judgments.features import cue_pairs
from program.judgments.passage import passage_features
from program.judgments.strip import strip_features, strip_inputs
from program.stages.refine import decompose
from program.stages.selfcheck import without_asked_entity
from program.text import words
from program.types import Passage


def states_answer(text: str, answers: list[str]) -> bool:
    """True when any gold answer appears in ``text`` as whole words (case-insensitive)."""
    lowered = text.lower()
    return any(re.search(rf"(?<!\w){re.escape(a.lower())}(?!\w)", lowered) for a in answers if a and a.strip())


def names_subject(text: str, subject: str) -> bool:
    """True when ``text`` holds at least half of the subject's name words (and its last one)."""
    wanted = [w for w in words(subject) if len(w) > 1]
    if not wanted:
        return False
    present = set(words(text))
    return wanted[-1] in present and sum(w in present for w in wanted) >= len(wanted) / 2


def popqa_passage_pairs(questions: list[dict], kb, k: int = 6) -> Pairs:
    """Top-``k`` retrieved passages of each PopQA question, labeled relevant or not."""
    pairs = Pairs()
    results = kb.search_batch([q["question"] for q in questions], k)
    for q, passages in zip(questions, results):
        for p in passages:
            label = names_subject(p.text, q["subject"]) and states_answer(p.text, q["possible_answers"])
            pairs.add(passage_features(q["question"], p.text, p.score), cue_pairs(q["question"], p.text), label,
                      q["id"],
                      text=(q["question"], judged_text(p)))
    return pairs


def popqa_strip_pairs(questions: list[dict], kb, embedder, k: int = 3, negatives: int = 4, seed: int = 0) -> Pairs:
    """Strips of each question's top-``k`` passages: every answering strip and up to
    ``negatives`` others (the most similar to the question first, so the hard ones)."""
    rng = random.Random(seed)
    chosen = []  # (question, strip, passage, label)
    for q, passages in zip(questions, kb.search_batch([q["question"] for q in questions], k)):
        rows = []
        for p in passages:
            about = names_subject(p.text, q["subject"])
            for s in decompose(p):
                starts_with_pronoun = bool(re.match(r"(he|she|it|they|his|her)\b", s.text.strip(), re.I))
                on_subject = names_subject(s.text, q["subject"]) or (about and starts_with_pronoun)
                rows.append((q, s, p, int(on_subject and states_answer(s.text, q["possible_answers"]))))
        positives = [r for r in rows if r[3]]
        rest = [r for r in rows if not r[3]]
        rng.shuffle(rest)
        chosen += positives + rest[: negatives + max(0, 2 - len(positives))]
    asked = list(dict.fromkeys(r[0]["question"] for r in chosen))
    question_vectors = dict(zip(asked, embedder.encode(asked))) if asked else {}
    strip_vectors = embedder.encode([r[1].text for r in chosen]) if chosen else []
    pairs = Pairs()
    for (q, s, p, label), vector in zip(chosen, strip_vectors):
        cos = float(vector @ question_vectors[q["question"]])
        pairs.add(strip_features(q["question"], s.text, cos, p.text, p.score), cue_pairs(q["question"], s.text),
                  label, q["id"])
    return pairs


def popqa_web_strip_pairs(questions: list[dict], web, embedder, k: int = 2, negatives: int = 4,
                          seed: int = 0) -> Pairs:
    """Strips of the web pages the correction finds for each question (``web.search(question,
    k)``, the offline snapshot), labeled like the knowledge base's: a strip of the subject's
    own page (its title names the subject) that states a gold answer is relevant; every
    answering strip and up to ``negatives`` others per question. A page's sentences rarely
    repeat its subject's name ("...the fencing section of CS Dinamo"), unlike the knowledge
    base's passages, so the strip judge must see such strips to keep them."""
    rng = random.Random(seed)
    chosen = []  # (question, strip text, page passage, label)
    for q in questions:
        rows = []
        for i, hit in enumerate(web.search(q["question"], k)):
            page = Passage(id=hit.url or f"web-{i}", text=(hit.content or hit.snippet or "")[:3000], source="web",
                           title=hit.title, url=hit.url)
            about = names_subject(hit.title or "", q["subject"])
            for s in decompose(page):
                rows.append((q, s.text, page, int(about and states_answer(s.text, q["possible_answers"]))))
        positives = [r for r in rows if r[3]]
        rest = [r for r in rows if not r[3]]
        rng.shuffle(rest)
        chosen += positives + rest[: negatives + max(0, 2 - len(positives))]
    if not chosen:
        return Pairs()
    asked = list(dict.fromkeys(r[0]["question"] for r in chosen))
    pages = list({id(r[2]): r[2] for r in chosen}.values())
    vectors = embedder.encode(asked + [judged_text(p)[:2000] for p in pages] + [r[1] for r in chosen])
    question_vectors = dict(zip(asked, vectors[: len(asked)]))
    page_vectors = {id(p): v for p, v in zip(pages, vectors[len(asked): len(asked) + len(pages)])}
    pairs = Pairs()
    for (q, text, page, label), vector in zip(chosen, vectors[len(asked) + len(pages):]):
        qv = question_vectors[q["question"]]
        dense, cues = strip_inputs(q["question"], text, float(vector @ qv), page, float(page_vectors[id(page)] @ qv))
        pairs.add(dense, cues, label, q["id"])
    return pairs


def chunk_key(chunk_id: str) -> str:
    """A chunk id as the labels write it: ``"kb/fees.md#2"`` -> ``"fees#2"``."""
    path, _, number = chunk_id.partition("#")
    return f"{PurePath(path).stem}#{number}" if number else PurePath(path).stem


def adversarial_passage_pairs(grading_rows: list[dict], query_rows: list[dict], kb, embedder, k: int = 5) -> Pairs:
    """Grading rows (relevant when reason is ``relevant``) and each query's top-``k`` chunks
    of the adversarial knowledge base (relevant when in the query's ``relevant_chunk_ids``)."""
    pairs = Pairs()
    if grading_rows:
        vectors = embedder.encode([r["question"] for r in grading_rows] + [r["passage"] for r in grading_rows])
        n = len(grading_rows)
        for r, cos in zip(grading_rows, np.einsum("ij,ij->i", vectors[:n], vectors[n:])):
            pairs.add(passage_features(r["question"], r["passage"], float(cos)), cue_pairs(r["question"], r["passage"]),
                      r["reason"] == "relevant", r["id"], float(r["relevance"]))
    asked = [r for r in query_rows if r.get("needs_retrieval", True)]
    for r, passages in zip(asked, kb.search_batch([r["question"] for r in asked], k)):
        relevant = set(r.get("relevant_chunk_ids") or []) if r.get("answerable", True) else set()
        for p in passages:
            pairs.add(passage_features(r["question"], p.text, p.score), cue_pairs(r["question"], p.text),
                      chunk_key(p.id) in relevant, r["id"], text=(r["question"], judged_text(p)))
    return pairs


# How a generator states a PopQA answer (relation -> claim templates; {s} subject, {a} answer).
CLAIM_TEMPLATES = {
    "capital": ["The capital of {s} is {a}.", "{a} is the capital of {s}.",
                "{s} has its administrative center in {a}."],
    "capital of": ["{s} is the capital of {a}."],
    "producer": ["The producer of {s} was {a}.", "{s} was produced by {a}."],
    "place of birth": ["{s} was born in {a}.", "{s} is a native of {a}."],
    "director": ["{s} was directed by {a}.", "The director of {s} was {a}."],
    "religion": ["The religion of {s} is {a}.", "{s} belonged to the {a}."],
    "composer": ["The composer of {s} was {a}.", "{s} was composed by {a}.", "The music of {s} was composed by {a}."],
    "genre": ["{s} is a {a} work.", "The genre of {s} is {a}."],
    "occupation": ["{s} is a {a}.", "{s} was a {a}.", "{s}'s occupation is {a}."],
    "country": ["{s} is in {a}.", "{s} is located in {a}."],
    "author": ["{s} was written by {a}.", "The author of {s} is {a}."],
    "screenwriter": ["The screenwriter for {s} was {a}.", "{s} was written by {a}."],
    "father": ["The father of {s} is {a}.", "{s} is the son of {a}."],
    "mother": ["The mother of {s} is {a}."],
    "sport": ["{s} plays {a}.", "{s} is a {a} player."],
}


def _stated_answer(text: str, answers: list[str]) -> str | None:
    """The first gold answer ``text`` states, spelled as the answer list spells it."""
    return next((a for a in answers if a and a.strip() and states_answer(text, [a])), None)


def _answering_strip(q: dict, passages) -> tuple[tuple[list, int] | None, list[str]]:
    """``((strips, i) of the first strip on the subject that states the answer, or None, texts of strips
    without it)``."""
    answering, other = None, []
    for p in passages:
        strips = decompose(p)
        about = names_subject(p.text, q["subject"])
        for i, s in enumerate(strips):
            pronoun = bool(re.match(r"(he|she|it|they|his|her)\b", s.text.strip(), re.I))
            on_subject = names_subject(s.text, q["subject"]) or (about and pronoun)
            if answering is None and on_subject and _stated_answer(s.text, q["possible_answers"]):
                answering = (strips, i)
            elif not states_answer(s.text, q["possible_answers"]):
                other.append(s.text)
    return answering, other


def popqa_claims(questions: list[dict], kb, k: int = 3, seed: int = 0) -> list[dict]:
    """Claims a generator makes from a PopQA question's strips, labeled supported or not.

    For each question whose top-``k`` passages hold an answering strip about its subject
    (labeled as in ``popqa_strip_pairs``), the evidence is that strip with its neighbours, as
    the recomposed strips show it. The claims (``CLAIM_TEMPLATES``, subject by full name or
    surname, then ``program.stages.selfcheck.without_asked_entity`` as the self-check applies it):
    * the gold answer as the evidence spells it: supported (``fully``);
    * the answer of another question with the same relation, absent from the evidence:
      not supported (``no``; MiniCheck's entity swap, on realistic claims);
    * the gold answer against strips of the same passages that do not state it: ``no``
      (an answer the strips do not hold).

    The knowledge base's passages state answers in their own words ("Czimra Gyula (Budapest,
    1901 - ...)"), unlike the copied sentences of ``synthetic_support_pairs``, so the support
    judge must see such claims to pass them.

    Returns:
        rows ``{"id": question id, "question", "claim", "evidence", "support": "fully" | "no"}``.
    """

    rng = random.Random(seed)
    by_relation: dict[str, list[str]] = {}
    for q in questions:
        by_relation.setdefault(q["relation"], []).append(q["possible_answers"][0])
    rows = []
    for q, passages in zip(questions, kb.search_batch([q["question"] for q in questions], k)):
        templates = CLAIM_TEMPLATES.get(q["relation"])
        if not templates:
            continue
        answering, other = _answering_strip(q, passages)
        if answering is None:
            continue
        strips, i = answering
        evidence = "\n".join(s.text for s in strips[max(0, i - 1): i + 2])
        answer = _stated_answer(strips[i].text, q["possible_answers"])
        subject = q["subject"] if rng.random() < 0.7 else q["subject"].split()[-1]
        template = rng.choice(templates)

        def claim(a: str) -> str:
            return without_asked_entity(template.format(s=subject, a=a), q["question"])

        asked = {"id": q["id"], "question": q["question"]}
        rows.append({**asked, "claim": claim(answer), "evidence": evidence, "support": "fully"})
        wrong = [a for a in by_relation[q["relation"]]
                 if not states_answer(evidence, [a]) and a not in q["possible_answers"]]
        if wrong:
            rows.append({**asked, "claim": claim(rng.choice(wrong)), "evidence": evidence, "support": "no"})
        if other:
            rows.append({**asked, "claim": claim(answer), "evidence": "\n".join(rng.sample(other, min(3, len(other)))),
                         "support": "no"})
    return rows


def popqa_support_pairs(questions: list[dict], kb, embedder, k: int = 3, seed: int = 0) -> Pairs:
    """``popqa_claims`` as the support judge's rows (label 1 for ``fully``; groups: question ids)."""
    rows = popqa_claims(questions, kb, k, seed)
    pairs = Pairs(cues=None)
    features = support_pair_features([(r["claim"], r["evidence"]) for r in rows], embedder,
                                     [r["question"] for r in rows])
    for r, dense in zip(rows, features):
        pairs.add(dense, None, r["support"] == "fully", r["id"])
    return pairs
