"""A deterministic fake LM for unit tests: rules per Signature, answered in DSPy's chat format.

``FakeLM({GradeRetrieval: fn, ...})``: for each call it finds which Signature's instructions
begin the last user message (a check continuing the reader's conversation,
``program.lm.continuation``) or are in the system message, parses the input fields from the user message, calls that
Signature's rule with them (a dict of strings) and formats the returned dict of outputs the
way DSPy's ChatAdapter expects. Every call is counted per signature in ``calls``.

A boolean output may be given as ``P(0.3)``, the model's probability of True: it is written
``True`` or ``False`` (by 0.5), and a request for log probabilities gets each word of the reply
as a token, that one with ``True`` and ``False`` as alternatives at those probabilities.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage
from dspy._vendor.lm15.types import TokenLogprob, TopLogprob

_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\n*\Z)", re.S)


class P(float):
    """A boolean output's probability of True (see the module docstring)."""


def _tokens(outputs: dict) -> tuple[TokenLogprob, ...]:
    tokens = []
    for k, v in outputs.items():
        tokens += [TokenLogprob(f"[[ ## {k} ## ]]", 0.0), TokenLogprob("\n", 0.0)]
        if isinstance(v, P):
            top = (TopLogprob("True", math.log(max(v, 1e-9))), TopLogprob("False", math.log(max(1 - v, 1e-9))))
            tokens.append(TokenLogprob(str(v >= 0.5), max(t.logprob for t in top), top=top))
        else:
            tokens.append(TokenLogprob(str(v), 0.0))
        tokens.append(TokenLogprob("\n\n", 0.0))
    return tuple(tokens + [TokenLogprob("[[ ## completed ## ]]", 0.0)])


class _RuleEngine:
    logprobs = True  # see P

    def __init__(self, owner: "FakeLM"):
        self.owner = owner

    def complete(self, request):
        system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system or ())
        users = [m.text or "" for m in request.messages if m.role == "user"]
        text, n_in, n_out = self.owner.reply(system, users[-1], users[:-1])
        logprobs = _tokens(self.owner.last_outputs) if request.config.logprobs is not None else None
        return Response(id=None, model="fake", message=Message.assistant([TextPart(text)]), finish_reason="stop",
                        usage=Usage(input_tokens=n_in, output_tokens=n_out), logprobs=logprobs)

    def stream(self, request):
        from dspy.lm15 import response_to_events

        return response_to_events(self.complete(request))

    def close(self):
        pass


class FakeLM(dspy.LM):
    """A ``dspy.LM`` whose answers come from ``rules: {SignatureClass: fn(inputs) -> outputs}``."""

    def __init__(self, rules: dict):
        self.rules = rules
        self.calls: Counter = Counter()
        super().__init__("fake/rules", engine=_RuleEngine(self), cache=False, num_retries=0)

    def reply(self, system: str, user: str, earlier: list[str] = ()) -> tuple[str, int, int]:
        """The completion for a prompt in DSPy's chat format: ``(text, prompt words, completion words)``.
        ``earlier``: the conversation's earlier user turns, whose context a continued check's
        references point to (``program.lm.continuation``)."""
        # a check continuing the reader's conversation has its instructions in the last user turn
        signature, rule = self.match(user, fallback=None) or self.match(system)
        inputs = {k: v.strip() for k, v in _FIELD.findall(user)}
        read = [dict(_FIELD.findall(u)) for u in earlier]
        context = next((r["context"].strip() for r in reversed(read) if "context" in r), None)
        if context is not None:
            inputs = {k: _resolved(v, parse_list(context)) for k, v in inputs.items()}
        self.calls[signature.__name__] += 1
        outputs = rule(inputs)
        self.last_outputs = outputs
        text = "".join(
            f"[[ ## {k} ## ]]\n"
            f"{json.dumps(v) if isinstance(v, (list, dict)) else v >= 0.5 if isinstance(v, P) else v}\n\n"
            for k, v in outputs.items()
        ) + "[[ ## completed ## ]]"
        return text, len((system + user).split()), len(text.split())

    def match(self, text: str, fallback=AssertionError):
        """``(signature, rule)`` of the first rule whose instructions' first line ``text`` holds at
        its start (a continued turn) or anywhere (a system message); ``fallback`` otherwise (raised
        when it is ``AssertionError``)."""
        for signature, rule in self.rules.items():
            first_line = signature.instructions.strip().splitlines()[0]
            if (text.startswith(first_line) if fallback is None else first_line in text):
                return signature, rule
        if fallback is AssertionError:
            raise AssertionError(f"FakeLM has no rule for this prompt: {text[:300]!r}")
        return fallback


def _resolved(value: str, context: list[str]) -> str:
    """A continued check's pointer to what the reading holds, read as a model reads it: the
    numbered strips (``"the numbered context strips above"``) or the named ones' text."""
    if value == "the numbered context strips above":
        return json.dumps(context)
    if re.fullmatch(r"the context strips? .*above", value):
        named = [int(n) for n in re.findall(r"\[(\d+)\]", value)] or range(1, len(context) + 1)
        return "\n".join(re.sub(r"^\[\d+\] ", "", context[n - 1]) for n in named)
    return value


def parse_list(value: str) -> list[str]:
    """Inputs of type list arrive JSON-encoded."""
    return json.loads(value)
