"""The judgments, one module each: what the program asks of a passage, a strip, a claim, an answer or a question.

* ``passage``: CRAG §4.2's retrieval evaluator, the relevance of each retrieved passage;
* ``strip``: CRAG §4.4's decompose-then-recompose filter, the relevance of each knowledge strip;
* ``support``: Self-RAG's IsSup (§3.1), MiniCheck's check that the evidence states a claim;
* ``usefulness``: Self-RAG's IsUse, read by the passage judge, with no judge of its own;
* ``rewrite``: CRAG §4.3's query rewrite (LM only);
* ``standalone``: a conversation's follow-up as a standalone question (LM only).

Each module is the judgment's runtime slice: its ``Judgment`` record (Signature, where its
predictor sits, its rows' kind), its trained judge's features and inputs, the thresholds it
owns as a typed object and the decisions it makes with them; its training slice is the module
of the same name in ``optimize.judgments``. This registry is how the compile, the adaptation
and the judges' store find them: ``JUDGMENTS`` by name, ``predictor_of(crag, judgment)`` for a
predictor. No other module names a predictor's path or reads a threshold's key
(``tests/test_house.py``). A module of this package that defines ``JUDGMENT`` is a slice: a new
judgment's module is found here without a line to add.
"""

from __future__ import annotations

import importlib
import pkgutil

from program.judgments.base import CANDIDATES, Inputs, Judgment, judged_text, passage_cosines

SLICES = tuple(module for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name)
               if hasattr(module := importlib.import_module(f"{__name__}.{info.name}"), "JUDGMENT"))

JUDGMENTS: dict[str, Judgment] = {m.JUDGMENT.name: m.JUDGMENT for m in SLICES}
PASSAGE, STRIP, SUPPORT = JUDGMENTS["passage"], JUDGMENTS["strip"], JUDGMENTS["support"]
USEFULNESS, REWRITE, STANDALONE = JUDGMENTS["usefulness"], JUDGMENTS["rewrite"], JUDGMENTS["standalone"]
SCORED = tuple(j for j in JUDGMENTS.values() if j.scored)  # a trained judge can stand behind each
TRAINED = tuple(j for j in SCORED if j.reads is None)  # each has a trained judge of its own


def as_judgment(name_or_record) -> Judgment:
    """The record for a judgment's name (as ``judges.json`` and the compile's report store it).

    Raises:
        KeyError: no judgment has that name."""
    return name_or_record if isinstance(name_or_record, Judgment) else JUDGMENTS[name_or_record]


def owned_thresholds(judges) -> dict[str, float]:
    """Every judgment's own thresholds as ``judges`` (a ``JudgeSet``) holds them (each its
    default when none was fit), by their keys in ``judges.json``: for reports, not decisions."""
    owned = (j.thresholds.of(judges).saved() for j in JUDGMENTS.values() if j.thresholds is not None)
    return {key: value for saved in owned for key, value in saved.items()}


def predictor_of(crag, judgment: Judgment):
    """``judgment``'s ``dspy.Predict`` in ``crag`` (a ``program.stages.crag.CRAG``).

    Raises:
        ValueError: the judgment has no predictor of its own."""
    if judgment.locate is None:
        raise ValueError(f"the {judgment.name} judgment has no predictor")
    return judgment.locate(crag)


def predictor_path(crag, locate) -> str:
    """The name ``crag.named_predictors()`` (and ``compiled/crag.json``) gives the predictor
    ``locate(crag)`` returns (a ``Judgment.locate`` or a compile spec's).

    Raises:
        LookupError: ``crag`` does not hold that predictor (a program built without it)."""
    predictor = locate(crag)
    for name, candidate in crag.named_predictors():
        if candidate is predictor:
            return name
    raise LookupError(f"{predictor!r} is not one of the program's predictors")


__all__ = ["CANDIDATES", "JUDGMENTS", "PASSAGE", "REWRITE", "SCORED", "SLICES", "STANDALONE", "STRIP", "SUPPORT",
           "TRAINED", "USEFULNESS", "Inputs", "Judgment", "as_judgment", "judged_text", "owned_thresholds",
           "passage_cosines", "predictor_of", "predictor_path"]
