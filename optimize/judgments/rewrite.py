"""The rewrite's training slice: compiled on the adversarial ``rewrite`` rows by what its query retrieves."""

from __future__ import annotations

from optimize import predictor_metrics as pm
from optimize.judgments.base import JudgmentTraining
from program.judgments import REWRITE

# the rows carry expert terms, not a query: only bootstrapped demos teach; the compile binds the
# metric to the adversarial knowledge base (pm.rewrite_metric_for)
TRAINING = JudgmentTraining(REWRITE, pm.rewrite_recall, pm.rewrite_figures, labeled_demos=False, threshold=0.5)
