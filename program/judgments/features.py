"""Cheap signals more than one judgment's trained judge reads: no LM call, no embedding.

Each judgment's own features are in its slice (``program.judgments.passage``, ``strip``,
``support``: a fixed-length list of floats, names in ``*_NAMES``). Passage and strip judges
also read answer-type cues: pairs of a question word that is not part of the entity's name
("occupation", "born", "refund") and a word of the text ("politician", "city", "days"),
hashed by ``program.judges.model``. A linear model over those pairs learns, from the training
split, which words state the kind of answer a question asks for.
"""

from __future__ import annotations

from program.question import parsed
from program.text import STOPWORDS, words

STALE_CUES = ("deprecated", "legacy", "archived", "superseded", "outdated", "no longer", "sunset",
              "discontinued", "retired", "old version", "replaced by")
MAX_CUE_WORDS = 120  # text words paired with question words; keeps a long passage's cost bounded


def name_phrase(question: str) -> str:
    """The longest run of capitalised words after the first word, lower-cased ("" when none;
    ``program.question.Question.name_phrase``)."""
    return parsed(question).name_phrase


def question_cue_words(question: str) -> list[str]:
    """The question's content words that are not names: what kind of answer it asks for."""
    question = parsed(question)
    return sorted(question.content_words - question.names)


def cue_pairs(question: str, text: str) -> list[str]:
    """``"question word|text word"`` pairs, hashed by the linear judge (answer-type cues)."""
    asked = question_cue_words(question)
    said = list(dict.fromkeys(w for w in words(text) if w not in STOPWORDS and len(w) > 1))[:MAX_CUE_WORDS]
    return [f"{q}|{t}" for q in asked for t in said] + [f"*|{t}" for t in said[:40]]


def name_signals(question: str, text: str) -> tuple[float, float, float, float]:
    """``(name coverage, name phrase present, names early, no names)`` of the question's names in ``text``."""
    wanted = parsed(question).names
    if not wanted:
        return 0.0, 0.0, 0.0, 1.0
    text_words = words(text)
    present = set(text_words)
    phrase = name_phrase(question)
    early = set(text_words[:25])
    return (len(wanted & present) / len(wanted), float(bool(phrase) and phrase in text.lower()),
            len(wanted & early) / len(wanted), 0.0)

