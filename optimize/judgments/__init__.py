"""The judgments' training slices, one module each beside its runtime slice (``program.judgments``).

Each module's ``TRAINING`` (``optimize.judgments.base.JudgmentTraining``) is how the compile
learns that judgment: its predictor's metric and figures, its candidates' measure and, for a
judgment with a trained judge, its ``fit`` and ``dev_figures``. ``TRAINING`` below lists them;
``optimize.compile`` builds its predictor specs from it and ``optimize.training.train`` fits each
trained judge through it, so neither names a judgment, a predictor path or a threshold. A
module of this package that defines ``TRAINING`` is a slice, found without a line to add.
"""

from __future__ import annotations

import importlib
import pkgutil

from optimize.judgments.base import Fitted, JudgmentTraining, TrainingData, fit_from_rows

SLICES = tuple(module for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
               if hasattr(module := importlib.import_module(f"{__name__}.{info.name}"), "TRAINING"))
TRAINING: tuple[JudgmentTraining, ...] = tuple(m.TRAINING for m in SLICES)
JUDGES: tuple[JudgmentTraining, ...] = tuple(t for t in TRAINING if t.fit is not None)  # a trained judge each

__all__ = ["Fitted", "JUDGES", "SLICES", "TRAINING", "JudgmentTraining", "TrainingData", "fit_from_rows"]
