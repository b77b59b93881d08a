"""What the compile needs of each trained judgment, one record each, beside the runtime's record.

``program.judges.judgments.Judgment`` holds what the program needs to make a judgment (its
Signature and predictor, its trained judge's inputs, its rows' kind). The compile needs more, and
the runtime never imports it: the metric its predictor is compiled against, the figures it is
reported by, how the three candidates (LM, trained, cascade) are measured on the same dev rows,
and how many labeled demos it gets. ``TRAINING`` lists them; ``optimize.compile`` builds the
judgments' ``PredictorSpec`` from them and ``optimize.judge_choice.choose`` measures each one's
candidates with ``measure``, so neither names a judgment.

Adding a judgment that learns from its own rows (``Judgment.example``, trained by
``optimize.training.train.fit_from_rows``) touches four files of code: its Signature (a module of
``signatures/``), its record and inputs (``program/judges/judgments.py``), its record here, and its
rows' schema (``eval_sets/adversarial/schema.py``); beside them, its labeled rows (a JSONL file)
and the stage that acts on what it judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from optimize import judge_choice as jc
from optimize import predictor_metrics as pm
from program.judges.judgments import PASSAGE, STRIP, SUPPORT, Judgment

Measure = Callable[..., dict]  # (judges, rows, thresholds, set name) -> {"lm", "trained", "cascade"} figures


@dataclass(frozen=True)
class JudgmentTraining:
    """One judgment as the compile trains, compiles and chooses it.

    Attributes:
        judgment: the runtime record (``program.judges.judgments``).
        metric: ``metric(example, prediction, trace=None) -> float`` in [0, 1], which the DSPy
            optimizer compiles its predictor against (``optimize.predictor_metrics``).
        figures: ``figures(results, knowledge_base=None) -> {"primary", ...}``, its dev figures.
        measure: ``measure(judges, rows, thresholds, set_name) -> {"lm", "trained", "cascade"}``:
            each candidate's figure on the LM's dev rows of one set (``adversarial`` or ``popqa``).
        extra_labeled: labeled demos added after the bootstrapped ones.
    """

    judgment: Judgment
    metric: Callable
    figures: Callable
    measure: Measure
    extra_labeled: int = 0


TRAINING: tuple[JudgmentTraining, ...] = (
    JudgmentTraining(PASSAGE, pm.grading_metric, pm.grading_figures,
                     lambda judges, rows, t, name: jc.passage_candidates(judges, rows, t)),
    JudgmentTraining(STRIP, pm.strip_accuracy, pm.strip_figures,
                     lambda judges, rows, t, name: jc.strip_candidates(judges, rows), extra_labeled=2),
    # PopQA's claims are labeled only fully / no: right when kept exactly when supported
    JudgmentTraining(SUPPORT, pm.support_accuracy, pm.support_figures,
                     lambda judges, rows, t, name: jc.support_candidates(judges, rows, kept_only=name == "popqa")),
)

__all__ = ["TRAINING", "JudgmentTraining"]
