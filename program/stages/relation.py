"""The asked role must stand in the strip: a check the word-overlap support judge cannot make.

A grounding checker must be shown claims that keep the entities and change what is said about
them (FactCC's rule-made swaps, Kryscinski et al. 2020; MiniCheck's synthetic hard negatives,
Tang et al. 2024), because a checker that counts shared words accepts them. Ours does:
"The producer of The Hunt was Craig Zobel" shares every name with "The Hunt
is a film directed by Craig Zobel", and the trained support judge (``program.judges``, word
overlap and entity cues) let such sentences cite the strip. In the hand check of the first
cited runs (``docs/lab/2026-12-03-citations-first-runs.md``) most wrong citations were such role
swaps.

The check is narrow on purpose. It applies only when the question asks who holds a role
("Who was the producer of Ghost?", "Who is the father of Louis?") and the sentence names that
role. The strip then supports the sentence only when it states the role for the sentence's own
answer name, next to it:

* the role word or a word of its stem: "producer" is stated by "produced by", "production of";
  a compound writing role by its head: "screenwriter" by "written by";
* a kinship role by its inverse: "father" by "son of", "daughter of"; a composer by "music by";
* an author's role (author, writer, creator) by a work "by" the name: "a novel by Henry McCook".

Every other question and sentence is left to the support judge.
"""

from __future__ import annotations

import re

from program.question import entity_names
from program.text import names, words

# "Who was the producer of Ghost?", "Who is the father of Louis?", "Who were the directors for …"
_ASKED_ROLE = re.compile(r"^\s*who\s+(?:is|was|are|were)\s+(?:the\s+)?([a-z][a-z-]*)\s+(?:of|for|behind)\b", re.I)
_KIN = {"father": {"son", "daughter", "child", "children", "sons", "daughters"},
        "mother": {"son", "daughter", "child", "children", "sons", "daughters"},
        "parent": {"son", "daughter", "child", "children", "sons", "daughters"},
        "son": {"father", "mother", "parent", "parents"},
        "daughter": {"father", "mother", "parent", "parents"}}
_AUTHORS = {"author", "writer", "creator"}
_NAMED_BY = {"composer": {"music"}, "lyricist": {"lyrics", "words"}}  # "music by Henry Russell"
_WRITER = "writer"  # a compound writing role ("screenwriter", "songwriter") is stated by "written by" too
# the name a role is stated for follows it ("directed by Jack Conway", "a son of geologist Olaf
# Holtedahl"), or stands just before it ("Craig Zobel produced"): words allowed between them
AFTER, BEFORE = 8, 3


def asked_role(question: str) -> str:
    """The role a who-question asks for, singular and lower-cased, or "" when it asks none.

    ``"Who was the producer of Ghost?"`` -> ``"producer"``; ``"Who were the directors of
    Men and Women?"`` -> ``"director"``; ``"What sport does John Parsons play?"`` -> ``""``.
    """
    m = _ASKED_ROLE.match(question)
    if not m:
        return ""
    role = m.group(1).lower()
    return role[:-1] if role.endswith("s") and not role.endswith("ss") else role  # "directors"; not "boss"


def same_stem(a: str, b: str) -> bool:
    """True when two lower-cased words share a stem: a common start of at least four letters
    that leaves at most three letters of the shorter word ("producer" / "produced", "writer" /
    "written"), or of six letters ("screenwriter" / "screenplay")."""
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return a == b or common >= 6 or common >= 4 and common >= min(len(a), len(b)) - 3


def _mentions(role: str, tokens: list[str]) -> list[tuple[int, int]]:
    """``(position, words allowed before it)`` where the strip states ``role``: its stem, which
    may follow the name ("Craig Zobel produced"), or a word the name always follows (a kin
    inverse, "music", an author's "by")."""
    inverse = _KIN.get(role, set()) | _NAMED_BY.get(role, set())
    heads = [role] + ([_WRITER] if role.endswith(_WRITER) and role != _WRITER else [])
    found = [(i, BEFORE) for i, w in enumerate(tokens) if any(same_stem(h, w) for h in heads)]
    found += [(i, 0) for i, w in enumerate(tokens) if w in inverse or role in _AUTHORS and w == "by"]
    return found


def states_role(sentence: str, strip: str, question: str) -> bool:
    """True unless the question asks a role, the sentence names it, and ``strip`` does not state
    it for the sentence's answer name (module docstring).

    Args:
        sentence: one answer sentence, markers removed.
        strip: the text it would cite (one strip, or several joined).
        question: the question answered.

    Returns:
        ``False`` only for a role the strip does not state near the sentence's answer name:
        ``states_role("The producer of The Hunt was Craig Zobel.", "The Hunt is a film directed
        by Craig Zobel.", "Who was the producer of The Hunt?")`` is ``False``. The answer name is
        the sentence's capitalised words outside the question; a sentence with none needs only
        the role stated somewhere in the strip.
    """
    role = asked_role(question)
    if not role or not any(same_stem(role, w) for w in words(sentence)):
        return True
    tokens = words(strip)
    mentions = _mentions(role, tokens)
    if not mentions:
        return False
    answer_names = names(sentence) - names(question) - entity_names(question) - {role}
    if not answer_names:
        return True
    at = [j for j, w in enumerate(tokens) if w in answer_names]
    return any(0 < j - i <= AFTER or 0 < i - j <= before for i, before in mentions for j in at)
