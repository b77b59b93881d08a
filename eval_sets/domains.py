"""The labeled domains: knowledge bases of documents with hand-labeled queries over them.

Each domain is a folder of ``eval_sets/`` laid out as ``eval_sets/DOMAINS.md`` says (``kb/`` plus
``queries.jsonl``, ``strips.jsonl``, ``support.jsonl``, ``rewrite.jsonl``; the help centre also has
``grading.jsonl`` and ``answers.jsonl``). PopQA is not one of them: its questions are templated and
its labels come from its answers (``eval_sets.popqa``).

>>> from eval_sets.domains import DOMAINS, load_rows
>>> sorted(DOMAINS)
['adversarial', 'handbook', 'kubernetes', 'owasp']
>>> len(load_rows("kubernetes", "queries", "test")) >= 120
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eval_sets import adversarial

ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Domain:
    """One labeled domain.

    Attributes:
        name: the set's name (``--set NAME``), also its folder under ``eval_sets/``.
        title: a few words for reports ("Kubernetes documentation").
        source: the ``source`` prefix of its component rows (``paylane`` for the help centre).
        kinds: the labeled files it has (a subset of ``eval_sets.adversarial.KINDS``).
        kb_docs: the (min, max) number of Markdown documents its ``kb/`` must hold.
        kb_words: the (min, max) words per document.
        verbatim: whether strips and evidence must be copied verbatim from ``kb/`` (the newer
            domains; the help centre mixes in PopQA text).
        trains: whether its train rows train the judges (``program.adaptation.adapt``); False for a
            domain kept for measuring only, whose labels no judge ever sees.
    """

    name: str
    title: str
    source: str
    kinds: tuple[str, ...]
    kb_docs: tuple[int, int]
    kb_words: tuple[int, int]
    verbatim: bool
    trains: bool = True

    @property
    def directory(self) -> Path:
        return ROOT / self.name

    @property
    def kb_dir(self) -> Path:
        return self.directory / "kb"


_NEW_KINDS = ("queries", "strips", "support", "rewrite")

DOMAINS: dict[str, Domain] = {
    "adversarial": Domain("adversarial", "the Paylane help centre", "paylane", adversarial.KINDS,
                          (60, 100), (150, 500), verbatim=False),
    "kubernetes": Domain("kubernetes", "Kubernetes documentation", "kubernetes", _NEW_KINDS,
                         (80, 150), (100, 1500), verbatim=True),
    "handbook": Domain("handbook", "a company handbook", "handbook", _NEW_KINDS,
                       (80, 150), (100, 1500), verbatim=True),
    # PDF, Word, PowerPoint and Excel files as OWASP released them: queries only, whole documents
    "owasp": Domain("owasp", "OWASP Top 10 and ASVS releases", "owasp", ("queries",),
                    (30, 40), (100, 200_000), verbatim=False, trains=False),
}


def domain(name: str) -> Domain:
    """The domain called ``name``.

    Raises:
        ValueError: no such domain (the message lists the known ones)."""
    try:
        return DOMAINS[name]
    except KeyError:
        raise ValueError(f"unknown domain {name!r}; expected one of: {', '.join(sorted(DOMAINS))}") from None


def load_rows(name: str, kind: str, split: str | None = None) -> list[dict]:
    """The labeled rows of ``kind`` in domain ``name`` (``split`` keeps one split); [] when the
    domain has no such file.

    Raises:
        ValueError: unknown domain, kind or split."""
    d = domain(name)
    if kind not in d.kinds:
        if kind not in adversarial.KINDS:
            raise ValueError(f"unknown kind {kind!r}; expected one of: {', '.join(adversarial.KINDS)}")
        return []
    return adversarial.load_rows(kind, split, d.directory)


__all__ = ["DOMAINS", "Domain", "domain", "load_rows"]
