"""What every judgment slice is made of: the ``Judgment`` record and the inputs helpers they share.

A judgment (docs/how-it-works.md, "A judgment, in one place") is one module of
``program.judgments``: its record (below), the features its trained judge reads, the typed
thresholds it owns and the decisions it makes with them. The registry (``program.judgments``)
lists the records; the compile and the adaptation read it, never a predictor's path or a
threshold's key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

Inputs = list[tuple[list[float], list[str] | None]]  # per scored item: dense features, cue pairs (None: none)
CANDIDATES = ("trained", "cascade", "lm")  # cheapest first: a tie on dev goes to the first
GRID = [round(float(x), 2) for x in np.arange(0.05, 1.0, 0.05)]  # every threshold is searched over it


def f1(labels, kept) -> float:
    """F1 (4 digits) of the items ``kept`` (booleans) against ``labels`` (0/1); 1.0 when both are empty."""
    labels, kept = np.asarray(labels, bool), np.asarray(kept, bool)
    tp = (labels & kept).sum()
    return round(float(2 * tp / (labels.sum() + kept.sum())), 4) if labels.sum() + kept.sum() else 1.0


@dataclass(frozen=True)
class Judgment:
    """One judgment the program makes, and everything that decides it.

    Attributes:
        name: the key in ``judges.json``, the compile's report and the trace.
        signature: the prompted ``dspy.Signature`` (the ``lm`` candidate).
        locate: ``locate(crag) -> dspy.Predict``: the Signature's predictor in a ``CRAG`` module,
            which the compile optimizes (``program.judgments.predictor_path`` names it in
            ``compiled/crag.json``); None when the judgment has none of its own.
        rows: the kind of labeled rows it learns from and is measured on (the adversarial set's
            ``grading`` / ``strips`` / ``support``, the compile's ``--only`` name); "" for none.
        feature_names: the dense features its trained judge reads, in order; () for an LM-only
            judgment (rewrite, standalone question).
        inputs: ``inputs(encode, **items) -> Inputs``: the trained judge's inputs for each item
            scored; ``encode(list[str]) -> np.ndarray`` embeds texts (``JudgeSet._encode``).
        candidates: who may decide it: ``trained``, ``cascade``, ``lm`` (``JudgeChoice.use``).
        reads: the judgment whose trained judge scores it (usefulness reads the passage judge),
            or None when it has its own.
        thresholds: the typed thresholds the judgment owns (a frozen dataclass of its slice with
            ``of(judges)`` and ``saved() -> {key: value}``), or None when it owns none.
    """

    name: str
    signature: type
    locate: Callable | None
    rows: str
    feature_names: tuple[str, ...] = ()
    inputs: Callable[..., Inputs] | None = None
    candidates: tuple[str, ...] = CANDIDATES
    reads: "Judgment | None" = None
    thresholds: type | None = None

    @property
    def judge(self) -> "Judgment":
        """The judgment whose trained judge scores this one: itself, or the one it ``reads``."""
        return self.reads or self

    @property
    def scored(self) -> bool:
        """True when a trained judge can stand behind it (it has inputs), not the LM alone."""
        return self.inputs is not None

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Judgment({self.name!r})"


def judged_text(passage) -> str:
    """The text a judge reads for ``passage``: a web page's title, then its text.

    A knowledge-base chunk states its subject in its text, as the training passages do; a web
    page's paragraphs often do not ("In 1996 Chiculiță retired as an athlete..."): its subject
    is the page title, so the title is read too, or the page looks like a namesake's.
    """
    title = (passage.title or "").strip()
    if passage.source != "web" or not title or passage.text.lstrip().startswith(title):
        return passage.text
    return f"{title}. {passage.text}"


def passage_cosines(encode, question: str, passages) -> list[float]:
    """Question-passage cosines: a knowledge-base passage's retrieval score (``passage.score``),
    else embedded here (``judged_text``, cut to 2,000 characters: a web page can be long)."""
    cosines = [p.score if p.source == "kb" and p.score else None for p in passages]
    missing = [i for i, c in enumerate(cosines) if c is None]
    if missing:
        vectors = encode([question] + [judged_text(passages[i])[:2000] for i in missing])
        for i, v in zip(missing, vectors[1:] @ vectors[0]):
            cosines[i] = float(v)
    return cosines
