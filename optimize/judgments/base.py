"""What every training slice is made of: the ``JudgmentTraining`` record and the data it trains on.

A judgment's training slice (``optimize.judgments.<name>``) says how the compile learns it: the
metric its predictor is compiled against, its dev figures, how its candidates (LM, trained judge,
cascade) are measured on the same rows, and, for a judgment with a trained judge, how that judge
and the thresholds it owns are fit on the train splits (``fit``) and reported on dev
(``dev_figures``). The runtime never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from program.adaptation.fit import fit_judge, out_of_fold
from program.adaptation.pairs import Pairs
from program.judgments import Judgment
from program.judgments.base import GRID, f1

Measure = Callable[..., dict]  # (judges, rows, thresholds, set name) -> {"lm", "trained", "cascade"} figures


@dataclass
class TrainingData:
    """The splits a compile trains the judges on and reports them on.

    Attributes:
        train_q, dev_q: PopQA's ``train`` / ``dev`` questions (``eval_sets.popqa.load_questions``).
        adv: kind (``grading``, ``strips``, ``support``, ``queries``, ...) -> split -> the
            adversarial set's rows.
        popqa_kb, adversarial_kb: the two knowledge bases; web: the offline web snapshot.
        embedder: ``encode(list[str]) -> np.ndarray`` of L2-normalised rows.
    """

    train_q: list
    dev_q: list
    adv: dict
    popqa_kb: object
    adversarial_kb: object
    embedder: object
    web: object = None


@dataclass
class Fitted:
    """One trained judge as its slice fit it: the judge, its training pairs, the thresholds it
    owns as ``judges.json`` saves them, and (the passage judgment) the evaluator's thresholds per
    knowledge base."""

    judge: object
    pairs: object
    thresholds: dict = field(default_factory=dict)
    by_corpus: dict = field(default_factory=dict)


def fit_from_rows(judgment: Judgment, rows: list[dict], example: Callable, encode) -> tuple[object, object, float]:
    """``(judge, pairs, keep)`` for a judgment trained on its own labeled rows alone, as a new
    judgment's ``fit`` may be: ``keep`` is the threshold of the best out-of-fold F1 (ties: nearest 0.5).

    Args:
        rows: the ``train`` rows of ``judgment.rows``, each with an ``id``.
        example: ``example(row) -> (items, label)``: one row as ``judgment.inputs``' items and its truth.
        encode: ``encode(list[str]) -> np.ndarray`` of L2-normalised rows.

    Raises:
        ValueError: a single label class among the rows."""
    pairs = Pairs()
    for row in rows:
        items, label = example(row)
        for dense, cues in judgment.inputs(encode, **items):
            pairs.add(dense, cues, label, row["id"])
    oof = out_of_fold(judgment, pairs)
    keep = max(GRID, key=lambda t: (f1(pairs.labels, oof >= t), -abs(t - 0.5)))
    return fit_judge(judgment, pairs), pairs, keep


@dataclass(frozen=True)
class JudgmentTraining:
    """One judgment as the compile trains, compiles and chooses it.

    Attributes:
        judgment: the runtime record (``program.judgments``).
        metric: ``metric(example, prediction, trace=None) -> float`` in [0, 1], which the DSPy
            optimizer compiles its predictor against (``optimize.predictor_metrics``).
        figures: ``figures(results, knowledge_base=None) -> {"primary", ...}``, its dev figures.
        measure: ``measure(judges, rows, thresholds, set_name) -> {"lm", "trained", "cascade"}``:
            each candidate's figure on the LM's dev rows of one set (``adversarial`` or ``popqa``);
            None for a judgment the LM alone makes.
        fit: ``fit(data: TrainingData) -> Fitted``: its trained judge and thresholds; None when
            it has no judge of its own.
        dev_figures: ``dev_figures(judges, data) -> {section: {figure: value}}``, merged into
            ``judges.json``'s ``figures``.
        extra_labeled: labeled demos added after the bootstrapped ones.
        labeled_demos: False when the labels are not the Signature's outputs (rewrite rows carry
            expert terms, not a query), so only bootstrapped demos teach.
        threshold: the metric score a bootstrapped trace needs to become a demo.
    """

    judgment: Judgment
    metric: Callable
    figures: Callable
    measure: Measure | None = None
    fit: Callable | None = None
    dev_figures: Callable | None = None
    extra_labeled: int = 0
    labeled_demos: bool = True
    threshold: float = 0.99
