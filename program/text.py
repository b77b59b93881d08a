"""Small text helpers shared by the checks: normalised words, content words, numbers."""

from __future__ import annotations

import re

STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or but is are was were be been being it its this that "
    "these those as has have had he she they his her their them who whom which what when where why how "
    "do does did not no".split()
)
NEGATIONS = frozenset({"not", "no", "never", "none", "cannot", "n't"})
_WORD = re.compile(r"[\w']+")
_MARKER = re.compile(r"\[\[ ## \w+ ## \]\]")


def _base(word: str) -> str:
    # "Espinal's" is the name "Espinal": without this a possessive claim never matched its evidence
    return word[:-2] if word.endswith("'s") and len(word) > 2 else word


def words(text: str) -> list[str]:
    """Lower-cased word tokens, possessive "'s" removed."""
    return [_base(w) for w in _WORD.findall(text.lower())]


def content_words(text: str) -> set[str]:
    """Words that carry content: not stopwords, longer than one character."""
    return {w for w in words(text) if w not in STOPWORDS and len(w) > 1}


def numbers(text: str) -> set[str]:
    return set(re.findall(r"\d+(?:[.,]\d+)?", text))


def names(text: str) -> set[str]:
    """Capitalised words (names, places, titles), lower-cased, stopwords left out.

    Tokenised like ``words`` (a hyphen splits), so every name of a text is among its words."""
    return {_base(w.lower()) for w in re.findall(r"\b[A-Z][\w']*", text)} - STOPWORDS


def has_negation(text: str) -> bool:
    return bool(NEGATIONS & set(words(text.replace("n't", " n't"))))


def clean_copy(text: str) -> str:
    """An LM's copied span without format markers, quotes or trailing punctuation."""
    text = _MARKER.sub(" ", str(text or "")).strip()
    return text.strip("\"'`“”").strip().rstrip(".").strip()


def is_none(text: str) -> bool:
    """True for an empty copy or the model's NONE."""
    return not text or text.upper().startswith("NONE")


def coverage(part: str, whole: str) -> float:
    """Share of ``part``'s content words that appear in ``whole`` (1.0 when ``part`` has none)."""
    needed = content_words(part)
    return len(needed & content_words(whole)) / len(needed) if needed else 1.0
