"""The standalone question: a follow-up in a conversation rewritten to stand on its own.

An LM judgment only (no trained judge): ``StandaloneQuestion`` reads the earlier turns and the
follow-up and writes the question the rest of the route answers (``program.stages.followup``).
The compile optimizes it on ``eval_sets/followups`` (the ``followups`` rows).
"""

from __future__ import annotations

from program.judgments.base import Judgment
from signatures import StandaloneQuestion

STANDALONE = Judgment("standalone", StandaloneQuestion, lambda crag: crag.followup.rewrite, "followups",
                      candidates=("lm",))
JUDGMENT = STANDALONE
