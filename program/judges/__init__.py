"""Trained judges behind the judgment Signatures (docs/judges.md).

Each judgment that scores text against a question or a claim has one contract: a score in
[0, 1]. Behind it stands the prompted LM (the Signature), a small trained judge
(``LinearJudge``), or a cascade of the two; ``python -m optimize.compile`` trains the judges,
measures all three on dev labels, and records which one each judgment uses. Each judgment is
one slice of ``program.judgments``: its Signature, features, thresholds and candidates.

No training lives here: the compile trains the judges (``optimize.training``), and ``program
index`` adapts them to a knowledge base (``program.adaptation``, from the labeled pairs the compile
saved and the rows the knowledge base gives of itself, ARES §3).
"""

from program.judges.model import LinearJudge
from program.judges.store import JUDGES_FILE, JudgeChoice, JudgesFileError, JudgeSet, load_judges, save_judges

__all__ = ["JUDGES_FILE", "JudgeChoice", "JudgesFileError", "JudgeSet", "LinearJudge", "load_judges", "save_judges"]
