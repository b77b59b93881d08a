"""Trained judges behind the judgment Signatures (docs/judges.md).

Each judgment that scores text against a question or a claim has one contract: a score in
[0, 1]. Behind it stands the prompted LM (the Signature), a small trained judge
(``LinearJudge``), or a cascade of the two; ``python -m optimize.compile`` trains the judges,
measures all three on dev labels, and records which one each judgment uses. Each judgment is
one record (``judgments``): its Signature, features, labeled rows and candidates.

The training lives here too, so that ``program index`` adapts the judges to a knowledge base
without the compile: ``pairs`` (labeled rows to features), ``train`` (fit and calibrate),
``sources`` (the labeled sources), ``synthetic_rows`` and ``lm_questions`` (rows a knowledge base
gives of itself, ARES §3) and ``adapt`` (all of it for one knowledge base).
"""

from program.judges.model import LinearJudge
from program.judges.store import JUDGES_FILE, JudgeChoice, JudgesFileError, JudgeSet, load_judges, save_judges

__all__ = ["JUDGES_FILE", "JudgeChoice", "JudgesFileError", "JudgeSet", "LinearJudge", "load_judges", "save_judges"]
