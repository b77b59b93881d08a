"""The set of trained judges a compile produced: scoring, saving and loading ``compiled/judges.json``.

``JudgeSet.score(judgment, **items)`` scores any judgment of ``program.judgments`` with
no LM call, one score in [0, 1] per item: ``score(PASSAGE, question=, passages=)`` (CRAG §4.2),
``score(STRIP, question=, strips=, passages=)`` (CRAG §4.4), ``score(SUPPORT, claim=, evidence=,
lexical_verdict=, question=)`` (Self-RAG's IsSup as a probability that the evidence states the
claim, MiniCheck's formulation) and ``score(USEFULNESS, question=, passages=)``.

Each ``JudgeChoice`` says who decides a judgment: ``trained`` (the judge alone), ``lm`` (the
prompted Signature alone) or ``cascade`` (the judge outside the uncertainty ``band``, the LM
inside it), as the compile measured best on the dev labels.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from program.atomic import write_atomic
from program.judgments import PASSAGE, SCORED, Judgment, as_judgment
from program.judges.model import LinearJudge
from program.retrieval.embedding import get_embedder

VECTOR_CACHE = 4096  # texts whose vectors a JudgeSet keeps (384 floats each: about 6 MB)
_VECTORS_LOCK = threading.Lock()  # module-level: a JudgeSet is deep-copied with the program

JUDGES_FILE = "judges.json"


@dataclass
class JudgeChoice:
    """Who decides one judgment.

    Attributes:
        use: ``trained``, ``lm`` or ``cascade``.
        band: ``(low, high)``: with ``cascade``, a trained score inside ``[low, high)`` is
            replaced by the LM's; outside it the trained score stands.
    """

    use: str = "trained"
    band: tuple[float, float] = (0.3, 0.7)

    @property
    def trained(self) -> bool:
        """True when a trained judge scores first (``trained``, or ``cascade`` before the LM)."""
        return self.use != "lm"

    def asks_lm(self, trained_score: float | None) -> bool:
        """True when the LM must judge (``lm``, or ``cascade`` with the score inside the band)."""
        if self.use == "lm" or trained_score is None:
            return True
        return self.use == "cascade" and self.band[0] <= trained_score < self.band[1]


def who_judges(judges: "JudgeSet | None", judgment: Judgment) -> JudgeChoice:
    """Who decides ``judgment`` (a ``program.judgments`` record): the one place every
    stage asks. ``judges.choice(judgment)`` (measured per knowledge base by the compile,
    docs/judges.md "The choice"), or the LM when the program has no trained judges."""
    return judges.choice(judgment) if judges is not None else JudgeChoice("lm")


@dataclass
class JudgeSet:
    """The trained judges, their thresholds and choices, and the embedder they read.

    Attributes:
        judges: a judgment's name (``program.judgments.TRAINED``) -> its ``LinearJudge``.
        choices: the same keys -> ``JudgeChoice``.
        thresholds: the evaluator's default ``lower`` / ``upper``, and the cuts each judgment
            owns, stored under keys its slice alone reads and writes (``program.judgments.strip``:
            a strip kept; ``program.judgments.support``: Self-RAG's fully / partially / no).
        thresholds_by_corpus: ``corpus_key`` -> the evaluator's thresholds calibrated on that
            knowledge base's own training questions (``thresholds_for``).
        choices_by_corpus: ``corpus_key`` -> judgment -> the ``JudgeChoice`` measured on that
            knowledge base's dev rows; ``corpus`` is the key in use (``for_knowledge_base``).
        figures: the compile's dev figures, for the manifest and the trace.
        adapted: empty for the compile's judges; for judges adapted to one knowledge base from its
            own documents (``program.adaptation.adapt``), what they were built from: ``corpus`` (its
            ``corpus_key``), ``name``, ``documents``, ``chunks``, ``rows``, ``sources``,
            ``seconds``, ``date`` and the ``stamp`` a rerun compares.
        embedder: ``encode(list[str]) -> np.ndarray`` of L2-normalised rows, set when loaded.
    """

    judges: dict[str, LinearJudge]
    choices: dict[str, JudgeChoice] = field(default_factory=dict)
    thresholds: dict[str, float] = field(default_factory=dict)
    figures: dict = field(default_factory=dict)
    thresholds_by_corpus: dict[str, dict] = field(default_factory=dict)
    choices_by_corpus: dict[str, dict[str, JudgeChoice]] = field(default_factory=dict)
    corpus: str = ""
    adapted: dict = field(default_factory=dict)
    embedder: object = None
    # the vectors of texts already embedded: attribution asks for the same strip sentences once
    # per answer sentence, clause and strip (a bounded LRU; cleared when the embedder changes)
    _vectors: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False, compare=False)
    _vectors_of: int = field(default=0, init=False, repr=False, compare=False)

    def for_knowledge_base(self, knowledge_base, embedder=None) -> "JudgeSet":
        """These judges as one knowledge base's program uses them: a new ``JudgeSet`` sharing the
        trained models, with ``knowledge_base``'s measured choices in use (``corpus``: its
        ``corpus_key``, "" when it has no manifest) and ``embedder`` (this set's own when None).
        ``self`` is left as it was."""
        try:
            key = corpus_key(knowledge_base)
        except (AttributeError, KeyError, TypeError):
            key = ""
        return replace(self, corpus=key, embedder=embedder if embedder is not None else self.embedder)

    def thresholds_for(self, knowledge_base) -> dict:
        """The evaluator's thresholds for ``knowledge_base``: those calibrated on its own labeled
        training questions when the compile had some (matched by ``corpus_key``), else the
        default ones (``thresholds``, calibrated on PopQA ``train``)."""
        try:
            own = self.thresholds_by_corpus.get(corpus_key(knowledge_base))
        except (AttributeError, KeyError, TypeError):
            own = None
        return {**self.thresholds, **(own or {})}

    def has(self, judgment: Judgment) -> bool:
        """True when a trained judge can score ``judgment`` (its own, or the one it reads)."""
        return judgment.judge.name in self.judges

    def choice(self, judgment: Judgment | str) -> JudgeChoice:
        """Who decides ``judgment`` (a record or its name): the choice measured on the current
        knowledge base (``for_knowledge_base``), else the overall one, else its trained judge when there
        is one, else the LM.

        A judgment that ``reads`` another's judge (usefulness, read by the passage judge in
        ``program.stages.usefulness``) and has no measured choice borrows that one's: the LM
        where the LM judges passages, else the trained judge. A cascade's band was calibrated on
        passage scores, not answers', so it is not applied to answers.
        """
        judgment = as_judgment(judgment)
        own = self.choices_by_corpus.get(self.corpus, {})
        measured = own.get(judgment.name) or self.choices.get(judgment.name)
        if measured is not None:
            return measured
        if judgment.reads is not None:
            # measured on the help centre's dev answers: the trained passage judge scored 30 of 31
            # right answers below the retry threshold there, where the LM judges passages
            return JudgeChoice("lm" if self.choice(judgment.reads).use == "lm" else "trained")
        return JudgeChoice("trained" if self.has(judgment) else "lm")

    def report(self) -> dict:
        """Who decides each judgment, for the trace, ``ask`` and ``/healthz``: ``{"judgments":
        {judgment: "trained" | "lm" | "cascade"}, "adapted": bool, "corpus": key, "calibrated_here":
        bool}`` (``calibrated_here``: the judges learned from rows of this knowledge base, labeled
        or its own), plus
        ``adapted_from`` (the adaptation's name, documents, rows and date) when adapted."""
        out = {"judgments": {j.name: self.choice(j).use for j in SCORED},
               "adapted": bool(self.adapted), "corpus": self.corpus,
               "calibrated_here": bool(self.corpus) and self.corpus in self.thresholds_by_corpus}
        if self.adapted:
            out["adapted_from"] = {k: self.adapted[k] for k in ("name", "documents", "chunks", "rows", "date")
                                   if k in self.adapted}
        return out

    def _encode(self, texts: list[str]) -> np.ndarray:
        """The embedder's rows for ``texts`` (``len(texts)`` x dimension), each text embedded once
        while it stays among the last ``VECTOR_CACHE`` asked for."""
        if self.embedder is None:
            self.embedder = get_embedder()
        if not texts:
            return np.asarray(self.embedder.encode(texts))
        with _VECTORS_LOCK:
            if self._vectors_of != id(self.embedder):
                self._vectors.clear()
                self._vectors_of = id(self.embedder)
            known = {t: self._vectors[t] for t in texts if t in self._vectors}
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:  # embedded outside the lock: other questions' threads need not wait for it
            known.update(zip(missing, np.asarray(self.embedder.encode(missing))))
        with _VECTORS_LOCK:
            for t in dict.fromkeys(texts):
                self._vectors[t] = known[t]
                self._vectors.move_to_end(t)
            while len(self._vectors) > VECTOR_CACHE:
                self._vectors.popitem(last=False)
        return np.stack([known[t] for t in texts])

    def score(self, judgment: Judgment, **items) -> list[float]:
        """Scores in [0, 1] of ``judgment``'s trained judge, one per item scored.

        Args:
            judgment: a ``program.judgments`` record.
            items: what its ``inputs`` reads: ``question`` and ``passages`` (``Passage``; a
                knowledge-base passage's retrieval cosine is reused, a web page is embedded,
                cut to 2,000 characters); ``question``, ``strips`` (``Strip``), the ``passages``
                they came from and optionally ``cosines`` (question-strip, already computed);
                or ``claim``, ``evidence``, ``lexical_verdict`` and ``question`` (one item).

        Raises:
            KeyError: no trained judge for it (``has``).
        """
        judge = self.judges[judgment.judge.name]
        return [judge.score(dense, cues) for dense, cues in judgment.inputs(self._encode, **items)]

    def to_dict(self) -> dict:
        return {"judges": {k: j.to_dict() for k, j in self.judges.items()},
                "choices": {k: asdict(c) for k, c in self.choices.items()},
                "thresholds": self.thresholds, "thresholds_by_corpus": self.thresholds_by_corpus,
                "choices_by_corpus": {k: {j: asdict(c) for j, c in v.items()}
                                      for k, v in self.choices_by_corpus.items()},
                "figures": self.figures, **({"adapted": self.adapted} if self.adapted else {})}

    @classmethod
    def from_dict(cls, d: dict) -> "JudgeSet":
        return cls(judges={k: LinearJudge.from_dict(j) for k, j in d["judges"].items()},
                   choices={k: JudgeChoice(c["use"], tuple(c["band"])) for k, c in d.get("choices", {}).items()},
                   thresholds=dict(d.get("thresholds", {})), figures=d.get("figures", {}),
                   thresholds_by_corpus=dict(d.get("thresholds_by_corpus", {})), adapted=dict(d.get("adapted", {})),
                   choices_by_corpus={k: {j: JudgeChoice(c["use"], tuple(c["band"])) for j, c in v.items()}
                                      for k, v in d.get("choices_by_corpus", {}).items()})


def corpus_key(knowledge_base) -> str:
    """A knowledge base's identity: sha256 (16 hex digits) of its manifest's file hashes.

    Raises:
        AttributeError / KeyError: the object has no ``manifest`` with ``files``."""
    files = knowledge_base.manifest["files"]
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def save_judges(judges: JudgeSet, directory: str | Path) -> Path:
    """Write ``judges.json`` into ``directory`` atomically (temporary file, then rename)."""
    path = Path(directory) / JUDGES_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, json.dumps(judges.to_dict(), sort_keys=True) + "\n")


class JudgesFileError(ValueError):
    """``judges.json`` exists but cannot be read; the message names the file and the problem."""


def load_judges(directory: str | Path) -> JudgeSet | None:
    """The judges saved in ``directory``, or None when it has no ``judges.json``.

    Raises:
        JudgesFileError: the file is not valid JSON or lacks a judge's fields.
    """
    path = Path(directory) / JUDGES_FILE
    if not path.exists():
        return None
    try:
        return JudgeSet.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise JudgesFileError(f"{path}: not a judges file ({type(exc).__name__}: {exc}); "
                              "rebuild it: python -m optimize.compile --out compiled --only judges") from None


def route_report(judges: JudgeSet | None) -> dict:
    """Who decides each judgment in CRAG's route (``JudgeSet.report``): CRAG never asks the LM
    to grade a passage, so passages are scored by the trained judge or by retrieval similarity;
    with no trained judges the LM decides the rest and nothing was adapted."""
    if judges is None:
        return {"judgments": {j.name: "similarity" if j is PASSAGE else "lm" for j in SCORED},
                "adapted": False, "corpus": "", "calibrated_here": False}
    report = judges.report()
    report["judgments"] = {**report["judgments"], PASSAGE.name: "trained" if judges.has(PASSAGE) else "similarity"}
    return report
