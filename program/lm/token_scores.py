"""A boolean output field's probability, read from the LM's token log probabilities.

A small model asked a yes/no question answers one word; the word hides how sure it was. The
probability it gave that word is a score in [0, 1] that thresholds can be calibrated on (the
issue's "scores, not booleans"; Self-RAG reads its reflection tokens' probabilities the same
way, Asai et al. 2023 §3.3). Works on DSPy's ``Prediction.logprobs`` (OpenAI's shape: a
``content`` list of ``{token, logprob, top_logprobs}``), whichever adapter laid out the reply
(``[[ ## field ## ]]\\nTrue`` or ``{"field": true}``).
"""

from __future__ import annotations

import math
import re

YES = ("true", "yes")
NO = ("false", "no")


def _get(entry, key, default=None):
    return entry.get(key, default) if isinstance(entry, dict) else getattr(entry, key, default)


def field_probability(logprobs, field: str) -> float | None:
    """P(True) of the boolean output ``field``, from the tokens of the reply.

    Args:
        logprobs: the prediction's ``logprobs`` (``{"content": [...]}``), or None.
        field: the output field's name, e.g. ``"answers_question"``.

    Returns:
        ``p(true) / (p(true) + p(false))`` summed over the alternatives offered at the first
        true/false token after the field's name (case and spacing ignored); the chosen token
        alone (1.0 or 0.0) when no alternatives were reported; None when the field or its
        value is not in the tokens (the caller then reads the parsed boolean).
    """
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    tokens = [str(_get(e, "token", "")) for e in content]
    text, ends = "", []
    for token in tokens:
        text += token
        ends.append(len(text))
    at = text.rfind(field)
    if at < 0:
        return None
    after = next(i for i, end in enumerate(ends) if end > at + len(field) - 1) + 1
    for entry in content[after:]:
        word = str(_get(entry, "token", "")).strip().strip('"').lower()
        if not word or not word.isalpha():
            continue
        if word not in YES + NO:
            return None
        yes = no = 0.0
        for alt in _get(entry, "top_logprobs") or []:
            alt_word = str(_get(alt, "token", "")).strip().strip('"').lower()
            p = math.exp(float(_get(alt, "logprob", -math.inf)))
            yes += p if alt_word in YES else 0.0
            no += p if alt_word in NO else 0.0
        if yes + no == 0.0:
            return 1.0 if word in YES else 0.0
        return yes / (yes + no)
    return None


def field_text_probability(logprobs, field: str) -> float | None:
    """How sure the LM was of a text output ``field``: the geometric mean of its tokens'
    probabilities, in [0, 1].

    Selective question answering reads an answer's likelihood the same way (Kamath et al. 2020
    use it as the baseline confidence). The tokens are ``field_token_logprobs``'s.

    Args:
        logprobs: the prediction's ``logprobs`` (``{"content": [{token, logprob, ...}, ...]}``), or None.
        field: the output field's name, e.g. ``"answer"``.

    Returns:
        The probability, or None when there are no log probabilities, the field is not in them,
        or its value holds no word.
    """
    logs = field_token_logprobs(logprobs, field)
    if not logs:
        return None
    return round(math.exp(sum(logs) / len(logs)), 4)


def field_token_logprobs(logprobs, field: str) -> list[float]:
    """The log probabilities (natural log, in order) of the tokens of a text output ``field``.

    The field's value is found in the reply's text: after ``[[ ## field ## ]]`` up to the next
    ``[[ ##`` marker (ChatAdapter), or after ``"field": "`` up to the closing quote (JSON). A
    token counts when its characters inside the value, citation markers ``[n]`` left out, hold a
    letter or a digit (whitespace and punctuation carry the format, not the answer; a token may
    straddle the value's edge or hold words and a marker together).

    Returns:
        One float per counted token; ``[]`` when there are no log probabilities, the field is
        not in them, or its value holds no word.
    """
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return []
    tokens = [str(_get(e, "token", "")) for e in content]
    text = "".join(tokens)
    marker = re.search(rf"\[\[\s*##\s*{re.escape(field)}\s*##\s*\]\]", text)
    if marker:
        begin = marker.end()
        nxt = text.find("[[", begin)
        end = nxt if nxt >= 0 else len(text)
    else:
        quoted = re.search(rf'"{re.escape(field)}"\s*:\s*"', text)
        if quoted is None:
            return []
        begin = quoted.end()
        close = re.search(r'(?<!\\)"', text[begin:])
        end = begin + close.start() if close else len(text)
    cited = [(begin + m.start(), begin + m.end()) for m in re.finditer(r"\[\d+\]", text[begin:end])]
    logs, at = [], 0
    for entry, token in zip(content, tokens):
        lo, hi = at, at + len(token)
        at = hi
        inside = "".join(text[i] for i in range(max(lo, begin), min(hi, end))
                         if not any(a <= i < b for a, b in cited))
        if any(ch.isalnum() for ch in inside):
            logs.append(float(_get(entry, "logprob", 0.0)))
    return logs
