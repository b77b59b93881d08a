"""The standalone question's training slice: the hand-written standalone questions of ``eval_sets/followups``."""

from __future__ import annotations

from optimize import predictor_metrics as pm
from optimize.judgments.base import JudgmentTraining
from program.judgments import STANDALONE

TRAINING = JudgmentTraining(STANDALONE, pm.standalone_overlap, pm.standalone_figures, threshold=0.8)
