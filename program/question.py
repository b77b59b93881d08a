"""The question, parsed once: its words, names, numbers, premise and the times it is set at.

``CRAG.forward`` makes one ``Question`` at the start; every stage and judge feature that reads
the question reads the same object, whose parts are computed the first time they are asked for
and kept. A ``Question`` is a ``str``: a Signature, a search and a log take it as the text. The
functions below (``entity_names``, ``premise_terms``, ...) accept a plain string too (training,
studies), and parse it then.
"""

from __future__ import annotations

import re
from functools import cached_property

from program.text import STOPWORDS, content_words, names, numbers, sentences, spelled_as_digits, words

# a code-like term: `quoted`, camelCase, snake_case or dotted, or a word holding a digit
_TERM = re.compile(r"`[^`]+`|\b\w*[a-z][A-Z]\w*\b|\b\w+[_.]\w+\b|\b\w*\d\w*\b")
# Text the user quotes is theirs to give ("Translate 'thank you'"), not a name to look up.
_QUOTED = re.compile(r"'[^']{3,}'|\"[^\"]{3,}\"|‘[^’]{3,}’|“[^”]{3,}”")
# a year as a question sets a time by it ("in 2075", "by March 2031", "the 2030 fee"): after a
# preposition, a month or "the", so that a user's own value ("2048 MiB", "runAsUser: 2000") is not one
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_YEAR = re.compile(rf"\b(?:in|by|from|until|till|through|since|before|after|during|for|of|the|year|{_MONTHS})\s+"
                   r"(19\d\d|20\d\d|21\d\d)\b(?![.-]\d)", re.I)
_COUNT = (r"\d+|a few|a couple of|several|many|one|two|three|four|five|six|seven|eight|nine|ten|fifteen|twenty|"
          r"thirty|forty|fifty|sixty|seventy|eighty|ninety|a hundred")
_UNIT = r"years?|decades?|centur(?:y|ies)"
_FUTURE = re.compile(rf"\b(?:({_COUNT})\s+({_UNIT})\s+(?:from now|ahead|hence|in the future|later)|"
                     rf"in\s+({_COUNT})\s+({_UNIT})(?:'?\s*time)?)\b", re.I)


class Question(str):
    """A question and its parts, each computed once (``functools.cached_property``).

    Attributes (frozensets of lower-cased words unless said):
        content_words: its content words (``program.text.content_words``).
        names: its name words: capitalised, not sentence-initial (``entity_names``).
        name_phrase: its longest run of capitalised words after the first, lower-cased (a str).
        digits: its numbers, spelled ones in digits.
        own_words: its content words and numbers in digits (``program.stages.draft.own_words``'s rule).
        premise: its names, numbers and code-like terms (``premise_terms``).
        asked_names: the premise a knowledge base that answers it must write (``asked_names``).
        asked_times: the years and spans into the future it is set at (``asked_times``).

    Example:
        >>> q = Question("What is Herlyn Espinal's occupation?")
        >>> sorted(q.names), q == "What is Herlyn Espinal's occupation?"
        (['espinal', 'herlyn'], True)
    """

    @cached_property
    def content_words(self) -> frozenset[str]:
        return frozenset(content_words(self))

    @cached_property
    def names(self) -> frozenset[str]:
        found: set[str] = set()
        for sentence in sentences(self):
            found |= names(" ".join(sentence.split()[1:]))  # a sentence's first word is capitalised by grammar
        return frozenset(found - STOPWORDS)

    @cached_property
    def name_phrase(self) -> str:
        tokens, best, run = re.findall(r"[\w']+", self)[1:], [], []
        for token in tokens + [""]:
            if token[:1].isupper():
                run.append(token[:-2] if token.endswith("'s") else token)
            else:
                best, run = max(best, run, key=len), []
        return " ".join(best).lower()

    @cached_property
    def digits(self) -> frozenset[str]:
        return frozenset(numbers(spelled_as_digits(self)))

    @cached_property
    def own_words(self) -> frozenset[str]:
        spelled = spelled_as_digits(self)
        return frozenset(content_words(spelled) | numbers(spelled))

    @cached_property
    def premise(self) -> frozenset[str]:
        found = set(self.names) | numbers(self)
        for match in _TERM.findall(self):
            found |= set(words(match.strip("`")))
        return frozenset(w for w in found if len(w) > 1)

    @cached_property
    def asked_names(self) -> frozenset[str]:
        quoted = set(words(" ".join(_QUOTED.findall(self))))
        return frozenset(t for t in self.premise - quoted
                         if not any(ch.isdigit() for ch in t) and "'" not in t and "’" not in t)

    @cached_property
    def asked_times(self) -> frozenset[str]:
        found = set(_YEAR.findall(self))
        for m in _FUTURE.finditer(self):
            count, unit = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            found.add(f"{count} {unit} from now".lower())
        return frozenset(found)


def parsed(question: str) -> Question:
    """``question`` as a ``Question``: itself when it is one (its parts already kept)."""
    return question if isinstance(question, Question) else Question(question)


def entity_names(question: str) -> set[str]:
    """The question's name words: capitalised words, lower-cased, not sentence-initial.

    ``"What is Herlyn Espinal's occupation?"`` -> ``{"herlyn", "espinal"}``. The first word of a
    sentence is capitalised by grammar, not because it names something, so it is left out.
    """
    return set(parsed(question).names)


def premise_terms(question: str) -> set[str]:
    """The question's own names, numbers and code-like terms, lower-cased words.

    ``"What is the default maxUnavailable for a Deployment?"`` -> ``{"maxunavailable", "deployment"}``.
    """
    return set(parsed(question).premise)


def asked_names(question: str) -> set[str]:
    """The question's names and code terms a knowledge base that answers it must write:
    ``premise_terms`` without numbers (a user's own values: "a 302 redirect"), contractions
    and words the user quotes.

    ``"What's the Velero command to back up a namespace?"`` -> ``{"velero"}``.
    """
    return set(parsed(question).asked_names)


def asked_times(question: str) -> set[str]:
    """The times a question is conditioned on: its years (``"2075"``) and its spans into the
    future (``"40 years from now"``, from "in 40 years" too), lower-cased.

    ``"What will the monthly fee be in 2075?"`` -> ``{"2075"}``; ``"What will it cost several
    decades from now?"`` -> ``{"several decades from now"}``; a date inside a version
    (``2024-03-01``) is a name, not a year: ``asked_names`` keeps it whole."""
    return set(parsed(question).asked_times)
