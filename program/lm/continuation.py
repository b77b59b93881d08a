"""Checks that continue the reader's conversation, so the prompt cache serves what it read.

The reader's call (``GenerateAnswer``) reads the question and the numbered strips; a claim
check that sends the same strips again in a prompt of its own makes the model read them twice.
llama.cpp (and vLLM, SGLang) keep each prompt's tokens and reuse the longest prefix a new
prompt shares with one they hold, so a check laid out as the next turn of the reader's
conversation (the reader's messages token for token, its reply, then a user turn with the
check's instruction and inputs) pays only for that turn. Self-RAG's critique tokens are
likewise generated after the passage and the segment they judge (Asai et al. 2023 §3.2).

- :func:`recorded_reading` keeps what the reader was sent and what it wrote (a ``Reading``);
- :func:`continuing` makes every call inside it such a continuation
  (:class:`ContinuingChatAdapter`), its inputs named in ``references`` written as a pointer to
  what the reading holds ("the context strips [2] above") instead of being sent again.

Both need the program's adapter (``program.lm.adapter.DataOnlyChatAdapter``, set inside
``CRAG.forward``); with another adapter configured nothing is recorded and the checks keep
their own prompts.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import dspy
from dspy.adapters.utils import format_field_value

from program.lm.adapter import DataOnlyChatAdapter, escape_field_markers


@dataclass(frozen=True)
class Reading:
    """One reader call as the LM saw it: the chat ``messages`` sent (``{"role", "content"}``
    dicts, system first) and the ``reply`` text it wrote."""

    messages: tuple[dict, ...]
    reply: str

    def continued(self) -> list[dict]:
        """The reading as the opening of a longer conversation: its messages and its reply."""
        return [dict(m) for m in self.messages] + [{"role": "assistant", "content": self.reply}]


@dataclass
class ReadingRecord:
    """Filled by the adapter inside :func:`recorded_reading`: the last call's messages and reply."""

    messages: tuple[dict, ...] = ()
    reply: str | None = None
    calls: int = field(default=0)

    @property
    def reading(self) -> Reading | None:
        """The recorded ``Reading``; None when no call was made or its reply was not recorded."""
        if not self.messages or self.reply is None:
            return None
        return Reading(self.messages, self.reply)


_RECORD: ContextVar[ReadingRecord | None] = ContextVar("crag_reading_record", default=None)


@contextmanager
def recorded_reading():
    """Record the messages and reply of the calls made inside the block (the last one is kept).

    Example:
        >>> with recorded_reading() as record:
        ...     generator.draft(question=q, strips=strips)
        >>> record.reading.messages[0]["role"]
        'system'
    """
    record = ReadingRecord()
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


class RecordingChatAdapter(DataOnlyChatAdapter):
    """The program's adapter: inputs kept as data, and each call's messages and reply recorded
    inside :func:`recorded_reading`."""

    def format(self, signature, demos, inputs):
        messages = super().format(signature, demos, inputs)
        record = _RECORD.get()
        if record is not None:
            record.messages, record.reply = tuple(dict(m) for m in messages), None
            record.calls += 1
        return messages

    def parse(self, signature, completion):
        record = _RECORD.get()
        if record is not None and record.reply is None:
            record.reply = completion
        return super().parse(signature, completion)


class ContinuingChatAdapter(RecordingChatAdapter):
    """Formats a call as the next turn of ``reading``: the reading's messages and reply, the
    Signature's demos as user/assistant pairs, then one user turn holding the Signature's
    instructions, its inputs (``[[ ## name ## ]]`` sections, those in ``references`` written as
    the given pointer) and the output fields asked for. The reply is parsed as ChatAdapter parses.

    Args:
        reading: the reader's call to continue.
        references: input name -> the text sent in its place (what the reading already holds).
    """

    def __init__(self, reading: Reading, references: dict[str, str] | None = None, **kwargs):
        super().__init__(**kwargs)
        self.reading = reading
        self.references = dict(references or {})

    def format(self, signature, demos, inputs):
        record = _RECORD.get()
        if record is not None:  # a continuation is not a reading of its own
            record.messages, record.reply = (), None
        sections = [signature.instructions]
        for name, info in signature.input_fields.items():
            if name in self.references:
                sections.append(f"[[ ## {name} ## ]]\n{self.references[name]}")
            elif name in inputs:
                sections.append(f"[[ ## {name} ## ]]\n{format_field_value(field_info=info, value=inputs[name])}")
        requirements = self.user_message_output_requirements(signature)
        if requirements:
            sections.append(requirements)
        turn = {"role": "user", "content": "\n\n".join(s for s in sections if s).strip()}
        return [*self.reading.continued(), *self.format_demos(signature, demos), turn]


@contextmanager
def continuing(reading: Reading | None, **references: str):
    """Inside the block every call continues ``reading`` (:class:`ContinuingChatAdapter`); with
    no reading, or another adapter than the program's configured, the block changes nothing.

    Args:
        reading: the reader's call, or None.
        **references: input name -> the pointer sent in place of its value
            (``evidence="the context strips [2] above"``).
    """
    adapter = dspy.settings.adapter
    if reading is None or not isinstance(adapter, DataOnlyChatAdapter):
        yield
        return
    references = {k: escape_field_markers(v) for k, v in references.items()}
    with dspy.context(adapter=ContinuingChatAdapter(reading, references)):
        yield


@contextmanager
def continuing_reference(**references: str):
    """Inside a :func:`continuing` block, send ``references`` (input name -> pointer) in place of
    those inputs too; outside one, nothing changes (the inputs are sent as they are)."""
    adapter = dspy.settings.adapter
    if not isinstance(adapter, ContinuingChatAdapter):
        yield
        return
    merged = {**adapter.references, **{k: escape_field_markers(v) for k, v in references.items()}}
    with dspy.context(adapter=ContinuingChatAdapter(adapter.reading, merged)):
        yield


def can_continue(reading: Reading | None) -> bool:
    """True when calls made now can continue ``reading``: there is one, and the program's adapter
    is the one configured (:func:`continuing` would change nothing otherwise)."""
    return reading is not None and isinstance(dspy.settings.adapter, DataOnlyChatAdapter)
