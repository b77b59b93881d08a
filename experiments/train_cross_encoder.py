"""Fine-tune the MiniLM cross-encoder as a passage judge, and measure it the transfer run's way.

The training rows are the passage pairs of ``optimize.training.sources`` sources that carry their text
(PopQA ``train``, the labeled domains' ``train`` queries, a knowledge base's own document rows):
every non-PopQA row, then PopQA rows sampled up to ``max_pairs``, so that the encyclopedia does not
drown the domains. The evaluator's thresholds for the measured knowledge base are calibrated on the
cross-encoder's scores of that knowledge base's own document rows (no labels), as the linear judge's
are in the adapted variant.
"""

from __future__ import annotations

import random
import time

import numpy as np

from experiments.cross_encoder import CrossEncoderJudge
from optimize.training.pairs import adversarial_passage_pairs
from optimize.metrics import confusion
from program.stages.decision import evaluator_action
from program.adaptation.calibrate import auc, calibrate_actions, group_runs, question_best
from program.adaptation.pairs import Pairs


def training_pairs(sources, max_pairs: int = 2000, seed: int = 0) -> tuple[list[tuple[str, str]], list[int]]:
    """``(pairs, labels)`` from the sources' passage rows that carry text (see the module docstring)."""
    own, popqa = [], []
    for s in sources:
        for text, label in zip(s.passage.texts, s.passage.labels):
            if text is not None:
                (popqa if s.name == "popqa" else own).append((text, label))
    rng = random.Random(seed)
    rng.shuffle(popqa)
    rows = own[:max_pairs] + popqa[: max(0, max_pairs - len(own))]
    return [t for t, _ in rows], [label for _, label in rows]


def _best_top3(pairs: Pairs, scores) -> dict:
    top3 = [i < 3 for g in group_runs(pairs.groups) for i in range(g)]
    return question_best([g for g, k in zip(pairs.groups, top3) if k], [s for s, k in zip(scores, top3) if k])


def cross_encoder_figures(sources, document_rows, name: str, kb, embedder, max_pairs: int = 2000,
                          time_cap: float = 600.0, epochs: int = 1, strips=None, log=print) -> dict:
    """Train the cross-encoder on ``sources`` (labels out, plus ``document_rows``: the measured
    knowledge base's own rows), calibrate ``lower`` / ``upper`` on its scores of ``document_rows``'
    questions, and return ``action_accuracy`` and ``passage_auc`` on domain ``name``'s test queries
    (as ``experiments.transfer.measure_domain`` computes them), with the training rows, steps and seconds.
    Training stops after ``epochs`` passes over the pairs or ``time_cap`` seconds, whichever comes first.
    ``strips`` (``program.adaptation.pairs.Pairs`` of (question, strip) texts, optional): also the ``strip_auc`` of the
    same judge reading strips, which it was not trained on."""
    from eval_sets.domains import load_rows

    started = time.perf_counter()
    pairs, labels = training_pairs(sources, max_pairs)
    judge = CrossEncoderJudge().fit(pairs, labels, epochs=epochs, time_cap=time_cap, log=log)
    trained = time.perf_counter() - started
    rows = document_rows.passage
    own_scores = judge.predict([t for t in rows.texts])
    best = _best_top3(rows, own_scores)
    thresholds = calibrate_actions(best, {g: a for g, a in document_rows.expected.items() if g in best})
    queries = load_rows(name, "queries", "test")
    test = adversarial_passage_pairs([], queries, kb, embedder)
    scores = judge.predict(test.texts)
    expected = {r["id"]: r["expected_action"] for r in queries if r.get("needs_retrieval", True)}
    test_best = _best_top3(test, scores)
    actions = {q: evaluator_action(test_best.get(q, 0.0), thresholds["lower"], thresholds["upper"]) for q in expected}
    strip_auc = auc(strips.labels, judge.predict(strips.texts)) if strips is not None and len(strips) else None
    log(f"{name}: cross-encoder on {len(pairs)} pairs, {judge.steps} steps ({trained:.0f} s): "
        f"passage AUC {auc(test.labels, scores)}, strip AUC {strip_auc}")
    return {"action_accuracy": round(float(np.mean([actions[q] == a for q, a in expected.items()])), 4),
            "passage_auc": auc(test.labels, scores), "strip_auc": strip_auc,
            "confusion": confusion(expected, actions),
            "thresholds": {"lower": thresholds["lower"], "upper": thresholds["upper"]},
            "train_pairs": len(pairs), "train_steps": judge.steps, "epochs": epochs,
            "train_seconds": round(trained, 1),
            "seconds": round(time.perf_counter() - started, 1)}


__all__ = ["cross_encoder_figures", "training_pairs"]
