"""Training pairs for the trained judges: the ``Pairs`` rows, and the builders that read no labeled set.

* ``adversarial_strip_pairs`` and ``support_rows_pairs`` turn strip and support rows (labeled by
  hand, or made by a knowledge base of itself, ``program.adaptation.synthetic_rows``) into features;
* ``synthetic_support_pairs``: MiniCheck's recipe (Tang et al. 2024, §3): a claim copied from a
  document's sentence is supported by it; the same claim with a name, a number or the negation
  changed, or joined to an unrelated clause, is not.

The builders over the labeled sets (PopQA, the labeled domains) are the compile's
(``optimize.training.pairs``). Every builder returns ``Pairs``: dense feature rows, cue lists (or
None), 0/1 labels and a group id per row (the question), so that figures can be computed per question.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import numpy as np

from program.judgments.features import cue_pairs
from program.judgments.support import evidence_sentences, support_features
from program.judgments.strip import strip_features
from program.stages.selfcheck import VERDICT_VALUE, lexical_support
from program.text import names


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
