"""Labeled pairs for the trained judges, from training splits only.

* PopQA ``train`` questions (``eval_sets.popqa``), labeled the CRAG paper's way (§5.5): a
  retrieved passage that names the question's subject and states a gold answer is relevant;
  a namesake's passage and other questions' passages are negatives (retrieval's top hits,
  so the hard ones: same name, same relation, come first). Strips of the top passages are
  labeled the same way, a strip that starts with a pronoun being about its passage's subject.
* The adversarial set's ``train`` rows: grading rows, the queries' retrieved chunks against
  their ``relevant_chunk_ids``, strip rows and support rows.
* Synthetic support pairs, MiniCheck's way (Tang et al. 2024, §3): a claim copied from a
  knowledge-base sentence is supported by it; the same claim with a name, a number or the
  negation changed, moved onto another entity, or joined to an unrelated clause is not.

Every builder returns ``Pairs``: dense feature rows, cue lists (or None), 0/1 labels and a
group id per row (the question), so that figures can be computed per question.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from pathlib import PurePath

import numpy as np

from program.judges.features import cue_pairs, evidence_sentences, passage_features, strip_features, support_features
from program.judges.judgments import judged_text, strip_inputs
from program.stages.refine import decompose
from program.stages.selfcheck import VERDICT_VALUE, lexical_support, without_asked_entity
from program.text import names, words
from program.types import Passage


@dataclass
class Pairs:
    """Rows for one judge: ``dense`` (n x features), ``cues`` (n lists or None), ``labels``
    (n of 0/1), ``groups`` (n question ids), ``targets`` (n graded labels, e.g. support
    verdicts as 1 / 0.5 / 0, or relevance in [0, 1])."""

    dense: list[list[float]] = field(default_factory=list)
    cues: list[list[str]] | None = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    targets: list[float] = field(default_factory=list)
    texts: list[tuple[str, str] | None] = field(default_factory=list)

    def add(self, dense, cues, label: int, group: str, target: float | None = None,
            text: tuple[str, str] | None = None) -> None:
        """One row; ``text`` is its ``(question, passage)`` where a model reading text may learn from it."""
        self.dense.append(dense)
        if self.cues is not None:
            self.cues.append(cues or [])
        self.labels.append(int(label))
        self.groups.append(group)
        self.targets.append(float(label if target is None else target))
        self.texts.append(text)

    def extend(self, other: "Pairs") -> "Pairs":
        self.dense += other.dense
        if self.cues is not None:
            self.cues += other.cues or [[] for _ in other.dense]
        self.labels += other.labels
        self.groups += other.groups
        self.targets += other.targets
        self.texts += other.texts or [None for _ in other.dense]
        return self

    def arrays(self):
        return np.asarray(self.dense, dtype=float), np.asarray(self.labels, dtype=int)

    def __len__(self) -> int:
        return len(self.labels)


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


def adversarial_strip_pairs(rows: list[dict], embedder) -> Pairs:
    """The strip rows: each strip, relevant when its 1-based number is in ``relevant``."""
    pairs = Pairs()
    for r in rows:
        vectors = embedder.encode([r["question"], " ".join(r["strips"])] + r["strips"])
        passage_cos = float(vectors[1] @ vectors[0])
        context = " ".join(r["strips"])
        for i, (strip, vec) in enumerate(zip(r["strips"], vectors[2:]), start=1):
            pairs.add(strip_features(r["question"], strip, float(vec @ vectors[0]), context, passage_cos),
                      cue_pairs(r["question"], strip), i in r["relevant"], r["id"], text=(r["question"], strip))
    return pairs


def support_pair_features(pairs: list[tuple[str, str]], embedder,
                          questions: list[str] | None = None) -> list[list[float]]:
    """``support_features`` of ``(claim, evidence)`` pairs, embedding each distinct text once.

    ``questions``: the question each claim answers (one per pair), or None when unknown."""
    questions = questions or [""] * len(pairs)
    split = [evidence_sentences(e) or [e] for _, e in pairs]
    texts = list(dict.fromkeys([c for c, _ in pairs] + [e[:2000] for _, e in pairs] + [s for ss in split for s in ss]))
    vectors = dict(zip(texts, embedder.encode(texts))) if texts else {}
    rows = []
    for (claim, evidence), sentences, question in zip(pairs, split, questions):
        c = vectors[claim]
        lexical = VERDICT_VALUE[lexical_support(claim, evidence, question)]
        rows.append(support_features(claim, sentences, [float(vectors[s] @ c) for s in sentences],
                                     float(vectors[evidence[:2000]] @ c), lexical, question))
    return rows


def support_rows_pairs(rows: list[dict], embedder) -> Pairs:
    """Labeled support rows: label 1 for ``fully``; the target keeps the three verdicts."""
    pairs = Pairs(cues=None)
    features = support_pair_features([(r["claim"], r["evidence"]) for r in rows], embedder)
    for r, dense in zip(rows, features):
        pairs.add(dense, None, r["support"] == "fully", r["id"], VERDICT_VALUE[r["support"]],
                  text=(r["claim"], r["evidence"]))
    return pairs


_NUMBER = re.compile(r"\b\d{1,4}\b")
_COPULA = re.compile(r"\b(is|was|are|were|has|had)\b")


def perturb(sentence: str, other_names: list[str], rng: random.Random) -> list[tuple[str, str]]:
    """MiniCheck-style unsupported variants of a supported sentence: ``(claim, kind)`` pairs.

    Kinds: ``name`` (a name swapped for one from another document), ``number`` (a number
    changed), ``negation`` (the first is/was negated), ``clause`` (an unrelated clause joined:
    partly supported at best).
    """
    out = []
    own = [n for n in re.findall(r"\b[A-Z][a-z]{2,}\b", sentence)[1:]]
    if own and other_names:
        target = rng.choice(own)
        swap = rng.choice([n for n in other_names if n.lower() not in sentence.lower()] or other_names)
        out.append((re.sub(rf"\b{re.escape(target)}\b", swap, sentence), "name"))
    if m := _NUMBER.search(sentence):
        n = int(m.group())
        changed = str(n + rng.choice([-3, -2, -1, 1, 2, 3, 10]))
        out.append((sentence[: m.start()] + changed + sentence[m.end():], "number"))
    if m := _COPULA.search(sentence):
        out.append((sentence[: m.end()] + " not" + sentence[m.end():], "negation"))
    return out


def synthetic_support_pairs(docs: list[tuple[str, str]], embedder, limit: int = 400, seed: int = 0) -> Pairs:
    """Supported and perturbed claims made from knowledge-base sentences (MiniCheck's recipe).

    Args:
        docs: ``(group id, document text)`` pairs from the training split only.
        limit: source sentences used (each gives one supported claim and up to three others).
    """
    rng = random.Random(seed)
    sentences = []
    for group, text in docs:
        for s in evidence_sentences(text):
            if 8 <= len(s.split()) <= 40:
                sentences.append((group, s, text))
    rng.shuffle(sentences)
    pool_names = sorted({n for _, s, _ in sentences[:3000] for n in re.findall(r"\b[A-Z][a-z]{3,}\b", s)})
    made = []  # (claim, evidence, label, group, target)
    for group, sentence, text in sentences[:limit]:
        # evidence: the sentence with its neighbours, as a strip set would show it
        all_sentences = evidence_sentences(text)
        i = all_sentences.index(sentence) if sentence in all_sentences else 0
        evidence = " ".join(all_sentences[max(0, i - 1): i + 2])
        claim = sentence if rng.random() < 0.5 else sentence.split(",")[0].rstrip(".") + "."
        made.append((claim, evidence, 1, group, 1.0))
        made += [(bad, evidence, 0, group, 0.0) for bad, _ in perturb(sentence, pool_names, rng)]
        other = rng.choice(sentences)[1]
        if not names(other) <= names(evidence):
            made.append((sentence.rstrip(".") + ", and " + other[0].lower() + other[1:], evidence, 0, group, 0.5))
    pairs = Pairs(cues=None)
    for (claim, evidence, label, group, target), dense in zip(made, support_pair_features([m[:2] for m in made],
                                                                                             embedder)):
        pairs.add(dense, None, label, group, target, text=(claim, evidence))
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
