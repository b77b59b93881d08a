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

    The tokens counted are those after the field's name up to the next field marker (``[[``),
    the end of the JSON string, or the end of the reply; whitespace, punctuation and ``[n]``
    citation tokens are left out (they carry the format, not the answer). Selective question
    answering reads an answer's likelihood the same way (Kadavath et al. 2022; Kamath et al.
    2020 use it as the baseline confidence).

    Args:
        logprobs: the prediction's ``logprobs`` (``{"content": [{token, logprob, ...}, ...]}``), or None.
        field: the output field's name, e.g. ``"answer"``.

    Returns:
        The probability, or None when there are no log probabilities or the field is not in them.
    """
    content = _get(logprobs, "content") if logprobs is not None else None
    if not content:
        return None
    tokens = [str(_get(e, "token", "")) for e in content]
    text, ends = "", []
    for token in tokens:
        text += token
        ends.append(len(text))
    at = text.rfind(f"## {field} ##")
    at = text.rfind(f'"{field}"') if at < 0 else at
    if at < 0:
        return None
    start = next((i for i, end in enumerate(ends) if end > at + len(field) + 5), len(tokens))
    logs, in_marker = [], False
    for entry in content[start:]:
        token = str(_get(entry, "token", ""))
        if "[[" in token or token.strip().startswith('"}'):
            break
        if "[" in token:
            in_marker = "]" not in token.split("[")[-1]
            continue
        if in_marker:  # the digits of a citation marker "[3]"
            in_marker = "]" not in token
            continue
        if any(ch.isalnum() for ch in token):
            logs.append(float(_get(entry, "logprob", 0.0)))
    if not logs:
        return None
    return round(math.exp(sum(logs) / len(logs)), 4)
