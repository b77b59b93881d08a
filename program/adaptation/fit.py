"""Fit the passage, strip and support judges on training pairs, and calibrate their thresholds.

``fit_judge`` fits one judgment's ``LinearJudge``; ``out_of_fold`` scores each row with a judge
that never saw its question, for calibration; ``fit_judges`` fits all three on any set of
sources (``SourcePairs``: the labeled sources the compile saved, ``program.adaptation.labeled``,
and the rows a knowledge base gives of itself, ``program.adaptation.synthetic_rows``). ``program
index`` fits here when it adapts the judges to a knowledge base (ARES §3); the compile's own
training is ``optimize.training``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from program.adaptation.calibrate import calibrate_actions, popqa_expected
from program.adaptation.pairs import Pairs
from program.judges import JudgeChoice, JudgeSet, LinearJudge
from program.judges.store import corpus_key
from program.judgments import PASSAGE, STRIP, SUPPORT, Judgment
from program.judgments import strip as strip_slice, support as support_slice


LABELED_SUPPORT_WEIGHT = 10.0


POPQA_CLAIM_WEIGHT = 3.0


SEED = 0


def fit_judge(judgment: Judgment, pairs: Pairs, c=1.0, weights: np.ndarray | None = None) -> LinearJudge:
    """``judgment``'s trained judge, fitted on ``pairs`` (its features, cue pairs when the pairs
    have them, 0/1 labels; ``weights`` per row, default equal).

    Raises:
        ValueError: a single label class, or mismatched lengths (``LinearJudge.fit``)."""
    dense, labels = pairs.arrays()
    return LinearJudge.fit(judgment.name, list(judgment.feature_names), dense, labels, pairs.cues, c=c,
                           sample_weight=weights, seed=SEED)


def trained_set(fitted: dict[Judgment, LinearJudge], **fields) -> JudgeSet:
    """A ``JudgeSet`` of the ``fitted`` judges, each deciding its judgment (``JudgeChoice("trained")``)
    until the compile measures otherwise; ``fields``: the rest of ``JudgeSet``'s (thresholds, ...)."""
    return JudgeSet({j.name: judge for j, judge in fitted.items()},
                    choices={j.name: JudgeChoice("trained") for j in fitted}, **fields)


def pair_scores(judges: JudgeSet, judgment: Judgment, pairs: Pairs) -> np.ndarray:
    """``judgment``'s trained scores in [0, 1] for already-featurised ``pairs`` (one per row)."""
    judge = judges.judges[judgment.name]
    cues = pairs.cues if pairs.cues is not None else [None] * len(pairs)
    return np.array([judge.score(d, c) for d, c in zip(pairs.dense, cues)])


def out_of_fold(judgment: Judgment, pairs: Pairs, folds: int = 5, c=1.0,
                weights: np.ndarray | None = None) -> np.ndarray:
    """Scores of each training row from a judge trained on the other folds (grouped by question)."""
    name, names = judgment.name, list(judgment.feature_names)
    groups = sorted(set(pairs.groups))
    fold_of = {g: i % folds for i, g in enumerate(np.random.default_rng(SEED).permutation(groups))}
    scores = np.zeros(len(pairs))
    dense, labels = pairs.arrays()
    for f in range(folds):
        test = np.array([fold_of[g] == f for g in pairs.groups])
        if test.all() or not test.any() or len(set(labels[~test])) < 2:
            continue
        cues = [c_ for c_, t in zip(pairs.cues, test) if not t] if pairs.cues is not None else None
        judge = LinearJudge.fit(name, names, dense[~test], labels[~test], cues, c=c, seed=SEED,
                                sample_weight=None if weights is None else weights[~test])
        for i in np.flatnonzero(test):
            scores[i] = judge.score(dense[i], pairs.cues[i] if pairs.cues is not None else None)
    return scores


@dataclass
class SourcePairs:
    """One source's training pairs and what calibrating on them needs.

    Attributes:
        name: ``popqa`` or a domain's name.
        kb: its knowledge base (thresholds are calibrated per knowledge base).
        passage, strip, support: training pairs of each judge (``program.adaptation.pairs.Pairs``).
        expected: query id -> expected action, for the training queries whose top chunks are
            in ``passage`` (PopQA: ``correct`` when a top-3 passage is relevant, else
            ``incorrect``).
        claims: PopQA only: the generator-style claims of its answers (kept or not).
        support_weight: the weight of its support rows beside the synthetic PopQA ones
            (hand-labeled rows weigh more; rows a knowledge base gives of itself weigh 1).
        counts: for rows a knowledge base gives of itself, ``asked`` and ``kept`` questions.
        corpus: its knowledge base's ``corpus_key``, set when the pairs are kept without the
            knowledge base (``kb`` None: pairs read back from the cache of ``program.adaptation.adapt``).
        files: for rows a knowledge base gives of itself, row group -> the corpus file it came
            from (``program.adaptation.own_rows`` keeps the rows of unchanged files).
    """

    name: str
    kb: object
    passage: Pairs
    strip: Pairs
    support: Pairs
    expected: dict[str, str] = field(default_factory=dict)
    claims: Pairs | None = None
    support_weight: float = LABELED_SUPPORT_WEIGHT
    corpus: str = ""
    counts: dict = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)

    def key(self) -> str:
        """Its knowledge base's ``corpus_key``."""
        return self.corpus or corpus_key(self.kb)

    def detached(self) -> "SourcePairs":
        """The same pairs without the knowledge base (picklable), its key kept in ``corpus``."""
        return SourcePairs(self.name, None, self.passage, self.strip, self.support, self.expected, self.claims,
                           self.support_weight, self.key(), self.counts, self.files)


def _query_rows(pairs: Pairs, expected: dict) -> list[int]:
    """Indexes of the pairs that are a training query's retrieved chunks (not grading rows)."""
    return [i for i, g in enumerate(pairs.groups) if g in expected]


def _join(parts: list[Pairs], cues: bool = True) -> Pairs:
    out = Pairs() if cues else Pairs(cues=None)
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
            best, expected, lower = popqa_expected(s.passage.groups, s.passage.labels, scores)
            t = {**calibrate_actions(best, expected), "lower": lower}
            t["upper"] = max(t["upper"], lower)
            popqa_default = {"lower": t["lower"], "upper": t["upper"]}
        else:
            rows = _query_rows(s.passage, s.expected)
            best, _, _ = popqa_expected([s.passage.groups[i] for i in rows], [s.passage.labels[i] for i in rows],
                                           scores[rows])
            expected = s.expected
            t = calibrate_actions(best, expected)
        by_corpus[s.key()] = {"name": s.name, **t}
        pooled_best.update({f"{s.name}/{q}": v for q, v in best.items()})
        pooled_expected.update({f"{s.name}/{q}": a for q, a in expected.items()})
        offset += len(s.passage)
    default = popqa_default or {k: v for k, v in calibrate_actions(pooled_best, pooled_expected).items()
                                if k in ("lower", "upper")}
    return by_corpus, default


def _strip_judge(sources: list[SourcePairs]) -> tuple[LinearJudge, dict]:
    """``(strip judge, its saved thresholds)``: the keep threshold for the best out-of-fold strip F1."""
    strip_pairs = _join([s.strip for s in sources])
    strip_oof = out_of_fold(STRIP, strip_pairs)
    return fit_judge(STRIP, strip_pairs), strip_slice.fit_thresholds(strip_pairs.labels, strip_oof).saved()


def _support_judge(sources: list[SourcePairs]) -> tuple[LinearJudge, dict]:
    """``(support judge, its saved thresholds)``: *partially* / *fully* on out-of-fold scores."""
    popqa = next((s for s in sources if s.name == "popqa"), None)
    synthetic = popqa.support if popqa else Pairs(cues=None)
    claims = popqa.claims if popqa and popqa.claims is not None else Pairs(cues=None)
    others = [s for s in sources if s.name != "popqa"]
    labeled = _join([s.support for s in others], cues=False)
    support_pairs = _join([synthetic, claims, labeled], cues=False)
    # the hand-labeled rows weigh as much as the synthetic ones together, as in train_judges
    weights = np.array([1.0] * len(synthetic) + [POPQA_CLAIM_WEIGHT] * len(claims)
                       + [w for s in others for w in [s.support_weight] * len(s.support)])
    support_oof = out_of_fold(SUPPORT, support_pairs, weights=weights)
    rows = slice(len(synthetic) + len(claims), len(support_pairs))
    targets = np.asarray(support_pairs.targets)[rows]
    claim_oof = support_oof[len(synthetic): len(synthetic) + len(claims)]
    if len(claims) and len(labeled):
        thresholds, _ = support_slice.fit_thresholds_sets(targets, support_oof[rows], claims.labels, claim_oof)
    elif len(labeled):
        thresholds, _ = support_slice.fit_thresholds(targets, support_oof[rows])
    else:  # PopQA alone: its claims are kept or not, so one threshold
        thresholds = support_slice.fit_kept(claims.labels, claim_oof)
    return fit_judge(SUPPORT, support_pairs, weights=weights), thresholds.saved()


def fit_judges(sources: list[SourcePairs], embedder=None, log=print) -> JudgeSet:
    """Train and calibrate the passage, strip and support judges on ``sources``.

    Thresholds (CRAG §4.3-4.4), each on out-of-fold scores of the training rows:
    * per knowledge base (``thresholds_by_corpus``): ``lower`` / ``upper`` for the best action
      accuracy on that source's training queries (PopQA's ``lower`` keeps 95 % of its relevant
      passages, as in ``train_judges``);
    * the default, for a knowledge base with no labels: PopQA's when PopQA is a source, else
      those calibrated on every source's training queries pooled;
    * the strip judgment's keep for the best strip F1, the support judgment's *partially* /
      *fully* for the best verdict accuracy of the labeled support rows (with PopQA, the mean of
      that and its claims' kept accuracy); each slice fits its own (``program.judgments``).

    Raises:
        ValueError: no source, or a judge with a single label class.
    """
    if not sources:
        raise ValueError("fit_judges needs at least one source")
    started = time.perf_counter()
    passage_pairs = _join([s.passage for s in sources])
    passage_oof = out_of_fold(PASSAGE, passage_pairs)
    passage = fit_judge(PASSAGE, passage_pairs)
    by_corpus, default = _passage_thresholds(sources, passage_oof)
    strip, strip_thresholds = _strip_judge(sources)
    support, support_thresholds = _support_judge(sources)

    judges = trained_set({PASSAGE: passage, STRIP: strip, SUPPORT: support},
                            thresholds={**default, **strip_thresholds, **support_thresholds},
                            thresholds_by_corpus=by_corpus, embedder=embedder)
    log(f"judges fitted on {', '.join(s.name for s in sources)} in {time.perf_counter() - started:.1f} s")
    return judges
