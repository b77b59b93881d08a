"""Labeled pairs of every source the judges can learn from, built once and combined at will.

The transfer run (``experiments.transfer``) trains the judges several times, each time with one
domain's labels left out. Building the pairs (retrieval, strips, embeddings) is the slow part, so
each source's pairs are built once, here, and :func:`fit_judges` combines any subset of them.

A source is PopQA (its ``train`` questions labeled by their answers, the offline web snapshot's
strips, synthetic MiniCheck-style support pairs from its training documents, and the claims a
generator makes of its answers) or a labeled domain of ``eval_sets.domains`` (its ``train``
grading rows and queries' retrieved chunks, strip rows and support rows). Every pair set is from a
training split; the ``measure_*`` pairs are from the splits that figures are reported on.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from eval_sets.domains import load_rows
from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions, read_jsonl
from program.judges import JudgeSet
from program.judges import pairs as jd
from program.judges import train as tj
from program.judges.judgments import PASSAGE, STRIP, SUPPORT
from program.judges.model import LinearJudge
from program.judges.store import corpus_key


@dataclass
class SourcePairs:
    """One source's training pairs and what calibrating on them needs.

    Attributes:
        name: ``popqa`` or a domain's name.
        kb: its knowledge base (thresholds are calibrated per knowledge base).
        passage, strip, support: training pairs of each judge (``program.judges.pairs.Pairs``).
        expected: query id -> expected action, for the training queries whose top chunks are
            in ``passage`` (PopQA: ``correct`` when a top-3 passage is relevant, else
            ``incorrect``).
        claims: PopQA only: the generator-style claims of its answers (kept or not).
        support_weight: the weight of its support rows beside the synthetic PopQA ones
            (hand-labeled rows weigh more; rows a knowledge base gives of itself weigh 1).
        counts: for rows a knowledge base gives of itself, ``asked`` and ``kept`` questions.
        corpus: its knowledge base's ``corpus_key``, set when the pairs are kept without the
            knowledge base (``kb`` None: pairs read back from the cache of ``program.judges.adapt``).
    """

    name: str
    kb: object
    passage: jd.Pairs
    strip: jd.Pairs
    support: jd.Pairs
    expected: dict[str, str] = field(default_factory=dict)
    claims: jd.Pairs | None = None
    support_weight: float = tj.LABELED_SUPPORT_WEIGHT
    corpus: str = ""
    counts: dict = field(default_factory=dict)

    def key(self) -> str:
        """Its knowledge base's ``corpus_key``."""
        return self.corpus or corpus_key(self.kb)

    def detached(self) -> "SourcePairs":
        """The same pairs without the knowledge base (picklable), its key kept in ``corpus``."""
        return SourcePairs(self.name, None, self.passage, self.strip, self.support, self.expected, self.claims,
                           self.support_weight, self.key(), self.counts)


def popqa_source(popqa_kb, embedder, web, log=print) -> SourcePairs:
    """PopQA's training pairs (``train`` questions only), as ``train_judges`` builds them."""

    train_q = load_questions(split="train")
    log(f"popqa: passage pairs of {len(train_q)} train questions")
    passage = jd.popqa_passage_pairs(train_q, popqa_kb)
    log("popqa: strip pairs (knowledge base and web snapshot)")
    strip = jd.popqa_strip_pairs(train_q, popqa_kb, embedder).extend(jd.popqa_web_strip_pairs(train_q, web, embedder))
    log("popqa: synthetic support pairs and claims")
    docs = {r["doc_id"]: r["text"] for r in read_jsonl(KNOWLEDGE_BASE_PATH)}
    train_docs = [(q["id"], docs[q["id"].replace("popqa-", "kb-")]) for q in train_q
                  if q["id"].replace("popqa-", "kb-") in docs]
    support = jd.synthetic_support_pairs(train_docs, embedder)
    claims = jd.popqa_support_pairs(train_q, popqa_kb, embedder)
    _, expected, _ = tj.popqa_expected(passage.groups, passage.labels, [0.0] * len(passage))
    return SourcePairs("popqa", popqa_kb, passage, strip, support, expected, claims)


def domain_source(name: str, kb, embedder, split: str = "train") -> SourcePairs:
    """A labeled domain's pairs from ``split`` (``train`` to learn from)."""

    queries = load_rows(name, "queries", split)
    passage = jd.adversarial_passage_pairs(load_rows(name, PASSAGE.rows, split), queries, kb, embedder)
    strip = jd.adversarial_strip_pairs(load_rows(name, STRIP.rows, split), embedder)
    support = jd.support_rows_pairs(load_rows(name, SUPPORT.rows, split), embedder)
    expected = {r["id"]: r["expected_action"] for r in queries if r.get("needs_retrieval", True)}
    return SourcePairs(name, kb, passage, strip, support, expected)


def _query_rows(pairs: jd.Pairs, expected: dict) -> list[int]:
    """Indexes of the pairs that are a training query's retrieved chunks (not grading rows)."""
    return [i for i, g in enumerate(pairs.groups) if g in expected]


def _join(parts: list[jd.Pairs], cues: bool = True) -> jd.Pairs:
    out = jd.Pairs() if cues else jd.Pairs(cues=None)
    for p in parts:
        out.extend(p)
    return out


def _passage_thresholds(sources: list[SourcePairs], passage_oof: np.ndarray) -> tuple[dict, dict]:
    """``(key -> that knowledge base's lower / upper thresholds, the default lower / upper)`` from out-of-fold
    scores."""
    by_corpus, pooled_best, pooled_expected, offset, popqa_default = {}, {}, {}, 0, None
    for s in sources:
        scores = passage_oof[offset: offset + len(s.passage)]
        if s.name == "popqa":
            best, expected, lower = tj.popqa_expected(s.passage.groups, s.passage.labels, scores)
            t = {**tj.calibrate_actions(best, expected), "lower": lower}
            t["upper"] = max(t["upper"], lower)
            popqa_default = {"lower": t["lower"], "upper": t["upper"]}
        else:
            rows = _query_rows(s.passage, s.expected)
            best, _, _ = tj.popqa_expected([s.passage.groups[i] for i in rows], [s.passage.labels[i] for i in rows],
                                           scores[rows])
            expected = s.expected
            t = tj.calibrate_actions(best, expected)
        by_corpus[s.key()] = {"name": s.name, **t}
        pooled_best.update({f"{s.name}/{q}": v for q, v in best.items()})
        pooled_expected.update({f"{s.name}/{q}": a for q, a in expected.items()})
        offset += len(s.passage)
    default = popqa_default or {k: v for k, v in tj.calibrate_actions(pooled_best, pooled_expected).items()
                                if k in ("lower", "upper")}
    return by_corpus, default


def _strip_judge(sources: list[SourcePairs]) -> tuple[LinearJudge, float]:
    """``(strip judge, strip_keep)``: the keep threshold for the best out-of-fold strip F1."""
    strip_pairs = _join([s.strip for s in sources])
    strip_oof = tj.out_of_fold(STRIP, strip_pairs)
    keep = max(tj.GRID, key=lambda t: (tj.f1(strip_pairs.labels, strip_oof >= t), -abs(t - 0.5)))
    return tj.fit_judge(STRIP, strip_pairs), keep


def _support_judge(sources: list[SourcePairs]) -> tuple[LinearJudge, float, float]:
    """``(support judge, support_partially, support_fully)``, the thresholds on out-of-fold scores."""
    popqa = next((s for s in sources if s.name == "popqa"), None)
    synthetic = popqa.support if popqa else jd.Pairs(cues=None)
    claims = popqa.claims if popqa and popqa.claims is not None else jd.Pairs(cues=None)
    others = [s for s in sources if s.name != "popqa"]
    labeled = _join([s.support for s in others], cues=False)
    support_pairs = _join([synthetic, claims, labeled], cues=False)
    # the hand-labeled rows weigh as much as the synthetic ones together, as in train_judges
    weights = np.array([1.0] * len(synthetic) + [tj.POPQA_CLAIM_WEIGHT] * len(claims)
                       + [w for s in others for w in [s.support_weight] * len(s.support)])
    support_oof = tj.out_of_fold(SUPPORT, support_pairs, weights=weights)
    rows = slice(len(synthetic) + len(claims), len(support_pairs))
    targets = np.asarray(support_pairs.targets)[rows]
    claim_oof = support_oof[len(synthetic): len(synthetic) + len(claims)]
    if len(claims) and len(labeled):
        lo, hi, _ = tj.calibrate_support_sets(targets, support_oof[rows], claims.labels, claim_oof)
    elif len(labeled):
        lo, hi, _ = tj.calibrate_support(targets, support_oof[rows])
    else:  # PopQA alone: its claims are kept or not, so one threshold; "fully" no lower than it
        lo = max(tj.GRID, key=lambda t: (float(((claim_oof >= t) == np.asarray(claims.labels, bool)).mean()), -t))
        hi = max(lo, 0.5)
    return tj.fit_judge(SUPPORT, support_pairs, weights=weights), lo, hi


def fit_judges(sources: list[SourcePairs], embedder=None, log=print) -> JudgeSet:
    """Train and calibrate the passage, strip and support judges on ``sources``.

    Thresholds (CRAG §4.3-4.4), each on out-of-fold scores of the training rows:
    * per knowledge base (``thresholds_by_corpus``): ``lower`` / ``upper`` for the best action
      accuracy on that source's training queries (PopQA's ``lower`` keeps 95 % of its relevant
      passages, as in ``train_judges``);
    * the default, for a knowledge base with no labels: PopQA's when PopQA is a source, else
      those calibrated on every source's training queries pooled;
    * ``strip_keep`` for the best strip F1; ``support_partially`` / ``support_fully`` for the
      best verdict accuracy of the labeled support rows (with PopQA, the mean of that and its
      claims' kept accuracy).

    Raises:
        ValueError: no source, or a judge with a single label class.
    """
    if not sources:
        raise ValueError("fit_judges needs at least one source")
    started = time.perf_counter()
    passage_pairs = _join([s.passage for s in sources])
    passage_oof = tj.out_of_fold(PASSAGE, passage_pairs)
    passage = tj.fit_judge(PASSAGE, passage_pairs)
    by_corpus, default = _passage_thresholds(sources, passage_oof)
    strip, keep = _strip_judge(sources)
    support, lo, hi = _support_judge(sources)

    judges = tj.trained_set({PASSAGE: passage, STRIP: strip, SUPPORT: support},
                            thresholds={**default, "strip_keep": keep, "support_partially": lo, "support_fully": hi},
                            thresholds_by_corpus=by_corpus, embedder=embedder)
    log(f"judges fitted on {', '.join(s.name for s in sources)} in {time.perf_counter() - started:.1f} s")
    return judges


__all__ = ["SourcePairs", "domain_source", "fit_judges", "popqa_source"]
