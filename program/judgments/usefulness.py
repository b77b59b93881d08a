"""Usefulness: Self-RAG's IsUse (§3.1), whether the final answer addresses its question.

It has no labeled rows and no trained judge of its own: the trained passage judge reads the
answer as a passage (its question is the same one: does this text, about this entity, state
what was asked?; ``reads``), or the LM's ``JudgeUsefulness`` says yes / no. The route's
``lower`` threshold decides a retry (``program.stages.usefulness``).
"""

from __future__ import annotations

from program.judgments.base import Judgment
from program.judgments.passage import PASSAGE, PASSAGE_NAMES, passage_inputs
from signatures import JudgeUsefulness

USEFULNESS = Judgment("usefulness", JudgeUsefulness, lambda crag: crag.usefulness.judge, "", tuple(PASSAGE_NAMES),
                      passage_inputs, candidates=("trained", "lm"), reads=PASSAGE)
JUDGMENT = USEFULNESS
