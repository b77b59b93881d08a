"""The set of trained judges a compile produced: scoring, saving and loading ``compiled/judges.json``.

``JudgeSet`` scores the three judgments with no LM call:

* ``passage_scores(question, passages)``: CRAG §4.2's relevance of each retrieved passage;
* ``strip_scores(question, strips, passages)``: CRAG §4.4's relevance of each knowledge strip;
* ``support_score(claim, evidence)``: Self-RAG's IsSup as a probability that the evidence
  states the claim (MiniCheck's formulation).

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
from program.judges.features import cue_pairs, evidence_sentences, passage_features, strip_features, support_features
from program.judges.model import LinearJudge
from program.retrieval.embedding import get_embedder

VECTOR_CACHE = 4096  # texts whose vectors a JudgeSet keeps (384 floats each: about 6 MB)
_VECTORS_LOCK = threading.Lock()  # module-level: a JudgeSet is deep-copied with the program

JUDGES_FILE = "judges.json"
JUDGMENTS = ("passage", "strip", "support")  # the judgments a trained judge can decide
REPORTED_JUDGMENTS = JUDGMENTS + ("usefulness",)  # and IsUse, read by the passage judge


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


def who_judges(judges: "JudgeSet | None", judgment: str) -> JudgeChoice:
    """Who decides ``judgment`` (``passage``, ``strip``, ``support``, ``usefulness``): the one
    place every stage asks. ``judges.choice(judgment)`` (measured per knowledge base by the
    compile, docs/judges.md "The choice"), or the LM when the program has no trained judges."""
    return judges.choice(judgment) if judges is not None else JudgeChoice("lm")


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


def strip_inputs(question: str, strip: str, cosine: float, source, passage_cosine: float) -> tuple[list[float], list[str]]:
    """The strip judge's inputs ``(dense features, cue pairs)`` for one strip (CRAG §4.4).

    Args:
        strip: the strip's text; cosine: its cosine with the question.
        source: the ``Passage`` it came from (None: the strip is its own context).
        passage_cosine: the source passage's cosine with the question (``judged_text``).

    A web page's sentence is about the page's subject, so it is read with the page's title,
    as the page is (``judged_text``). Training (``program.judges.pairs``) builds its rows here too.
    """
    context = judged_text(source) if source is not None else strip
    text = judged_text(replace(source, text=strip)) if source is not None else strip
    return strip_features(question, text, cosine, context, passage_cosine), cue_pairs(question, text)


@dataclass
class JudgeSet:
    """The trained judges, their thresholds and choices, and the embedder they read.

    Attributes:
        judges: ``passage`` / ``strip`` / ``support`` -> ``LinearJudge``.
        choices: the same keys -> ``JudgeChoice``.
        thresholds: the evaluator's default ``lower`` / ``upper``, ``strip_keep`` (a strip is
            kept at or above it), ``support_fully`` and ``support_partially`` (support score ->
            Self-RAG's fully / partially / no).
        thresholds_by_corpus: ``corpus_key`` -> the evaluator's thresholds calibrated on that
            knowledge base's own training questions (``thresholds_for``).
        choices_by_corpus: ``corpus_key`` -> judgment -> the ``JudgeChoice`` measured on that
            knowledge base's dev rows; ``corpus`` is the key in use (``use_corpus``).
        figures: the compile's dev figures, for the manifest and the trace.
        adapted: empty for the compile's judges; for judges adapted to one knowledge base from its
            own documents (``program.judges.adapt``), what they were built from: ``corpus`` (its
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

    def use_corpus(self, knowledge_base) -> None:
        """Judge for ``knowledge_base``: its own measured choices apply when the compile had
        labeled rows from it (``choices_by_corpus``), the overall ones otherwise."""
        try:
            self.corpus = corpus_key(knowledge_base)
        except (AttributeError, KeyError, TypeError):
            self.corpus = ""

    def thresholds_for(self, knowledge_base) -> dict:
        """The evaluator's thresholds for ``knowledge_base``: those calibrated on its own labeled
        training questions when the compile had some (matched by ``corpus_key``), else the
        default ones (``thresholds``, calibrated on PopQA ``train``)."""
        try:
            own = self.thresholds_by_corpus.get(corpus_key(knowledge_base))
        except (AttributeError, KeyError, TypeError):
            own = None
        return {**self.thresholds, **(own or {})}

    def choice(self, judgment: str) -> JudgeChoice:
        """Who decides ``judgment``: the choice measured on the current knowledge base
        (``use_corpus``), else the overall one, else its trained judge when there is one,
        else the LM.

        Usefulness has no labeled rows of its own; it is read by the passage judge
        (``program.stages.usefulness``), so it borrows the passage judgment's choice: the LM where the
        LM judges passages, else the trained judge. A cascade's band was calibrated on passage
        scores, not answers', so it is not applied to answers.
        """
        own = self.choices_by_corpus.get(self.corpus, {})
        measured = own.get(judgment) or self.choices.get(judgment)
        if measured is not None:
            return measured
        if judgment == "usefulness":
            # measured on the help centre's dev answers: the trained passage judge scored 30 of 31
            # right answers below the retry threshold there, where the LM judges passages
            return JudgeChoice("lm" if self.choice("passage").use == "lm" else "trained")
        return JudgeChoice("trained" if judgment in self.judges else "lm")

    def report(self) -> dict:
        """Who decides each judgment, for the trace, ``ask`` and ``/healthz``: ``{"judgments":
        {judgment: "trained" | "lm" | "cascade"}, "adapted": bool, "corpus": key, "calibrated_here":
        bool}`` (``calibrated_here``: the judges learned from rows of this knowledge base, labeled
        or its own), plus
        ``adapted_from`` (the adaptation's name, documents, rows and date) when adapted."""
        out = {"judgments": {j: self.choice(j).use for j in REPORTED_JUDGMENTS},
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

    def passage_scores(self, question: str, passages) -> list[float]:
        """Relevance in [0, 1] of each passage (``program.types.Passage``) to the question.

        A knowledge-base passage's retrieval cosine (``passage.score``) is reused; other
        passages (web pages) are embedded here, cut to 2,000 characters.
        """
        if not passages:
            return []
        cosines = self._passage_cosines(question, passages)
        judge = self.judges["passage"]
        return [judge.score(passage_features(question, judged_text(p), c), cue_pairs(question, judged_text(p)))
                for p, c in zip(passages, cosines)]

    def _passage_cosines(self, question: str, passages) -> list[float]:
        """Question-passage cosines: a knowledge-base passage's retrieval score, else embedded here."""
        cosines = [p.score if p.source == "kb" and p.score else None for p in passages]
        missing = [i for i, c in enumerate(cosines) if c is None]
        if missing:
            vectors = self._encode([question] + [judged_text(passages[i])[:2000] for i in missing])
            for i, v in zip(missing, vectors[1:] @ vectors[0]):
                cosines[i] = float(v)
        return cosines

    def strip_scores(self, question: str, strips, passages, cosines: list[float] | None = None) -> list[float]:
        """Relevance in [0, 1] of each strip (``program.types.Strip``) to the question.

        Args:
            passages: the passages the strips came from (their text is the strips' context).
            cosines: question-strip cosines when the caller already embedded the strips.
        """
        if not strips:
            return []
        if cosines is None:
            vectors = self._encode([question] + [s.text for s in strips])
            cosines = (vectors[1:] @ vectors[0]).tolist()
        by_id = {p.id: p for p in passages}
        passage_cos = dict(zip((p.id for p in passages), self._passage_cosines(question, passages)))
        judge = self.judges["strip"]
        scores = []
        for strip, cos in zip(strips, cosines):
            dense, cues = strip_inputs(question, strip.text, float(cos), by_id.get(strip.source_id),
                                       float(passage_cos.get(strip.source_id, 0.0)))
            scores.append(judge.score(dense, cues))
        return scores

    def support_score(self, claim: str, evidence: str, lexical_verdict: float, question: str = "") -> float:
        """Probability in [0, 1] that ``evidence`` states ``claim`` (Self-RAG IsSup; MiniCheck's
        check). ``question``: the question the claim answers, whose words are not evidence of it."""
        sentences = evidence_sentences(evidence) or [evidence]
        vectors = self._encode([claim, evidence[:2000]] + sentences)
        cosines = (vectors[2:] @ vectors[0]).tolist()
        dense = support_features(claim, sentences, cosines, float(vectors[1] @ vectors[0]), lexical_verdict, question)
        return self.judges["support"].score(dense)

    def support_verdict(self, score: float) -> str:
        """Self-RAG's verdict for a support score, by the calibrated thresholds."""
        if score >= self.thresholds.get("support_fully", 0.5):
            return "fully"
        return "partially" if score >= self.thresholds.get("support_partially", 0.35) else "no"

    def to_dict(self) -> dict:
        return {"judges": {k: j.to_dict() for k, j in self.judges.items()},
                "choices": {k: asdict(c) for k, c in self.choices.items()},
                "thresholds": self.thresholds, "thresholds_by_corpus": self.thresholds_by_corpus,
                "choices_by_corpus": {k: {j: asdict(c) for j, c in v.items()} for k, v in self.choices_by_corpus.items()},
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
                              "rebuild it: python -m optimize.compile --only judges") from None
