"""OpenAI's chat API on the service: ``POST /v1/chat/completions`` and ``GET /v1/models``.

A chat front-end (Open WebUI, LibreChat, an editor plugin, the ``openai`` client) talks to CRAG as
to any chat model. Each knowledge base the server answers from is one *model*, named as the
operator named it. The last message is the question; the user's earlier turns and the
assistant's replies are the conversation it follows (``program.stages.followup`` rewrites a
follow-up into a standalone question first). The reply's text is the answer with its ``[n]``
markers, or the decline; two extra fields say the rest: ``citations`` (file, page, title, URL of
each ``[n]``) and ``crag`` (action, outcome, confidence, declined or not, why, the standalone question).

``stream: true`` sends ``chat.completion.chunk`` events: the role at once, a comment line while
the program judges (keeps proxies from closing the connection), the answer's words once the
verdict is known (never words that may still be declined), the last chunk with
``finish_reason`` and the extra fields, the usage when ``stream_options.include_usage`` asks,
then ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from program.app.service.models import FilterBody
from program.app.service.public import public
from program.app.service.runner import Options, QuestionRunner, ServiceError
from program.guards.question import QuestionError, validate_question
from program.types import CRAGResult

MAX_TURNS = 64  # messages in one request; a chat front-end sends the whole conversation
KEEP_ALIVE_SECONDS = 10.0
# What no turn may hold: a lone surrogate (JSON's "\ud800" escape: no Unicode text, it cannot be
# encoded for the LM, a log or a reply) and a control character but tab and line breaks (as a question).
_NOT_TEXT = re.compile(r"[\ud800-\udfff\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def check_turn_text(text: str, what: str = "the message") -> str:
    """``text`` if a turn may hold it: Unicode text without control characters (tab and line
    breaks are text). ``what`` names it in the message (``the message``, ``part 2``).

    Raises:
        QuestionError: a lone surrogate or a control character, with its code point and position."""
    found = _NOT_TEXT.search(text)
    if found is None:
        return text
    char, where = found.group(), found.start() + 1
    if "\ud800" <= char <= "\udfff":
        raise QuestionError(f"{what} holds the lone surrogate U+{ord(char):04X} at position {where}: not Unicode text")
    raise QuestionError(f"{what} holds the control character U+{ord(char):04X} at position {where}")


class TextPart(BaseModel):
    """One part of a message's content; only text is read."""

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One turn of the conversation. ``system`` and ``developer`` turns are read by nobody: the
    program's instructions are its compiled ones."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    @field_validator("content")
    @classmethod
    def _is_text(cls, content: str | list[TextPart] | None) -> str | list[TextPart] | None:
        # every turn, before any work: the last is the question, the others go to the LM with it
        if isinstance(content, list):
            for number, part in enumerate(content, 1):
                check_turn_text(part.text, f"part {number}")
        elif content is not None:
            check_turn_text(content)
        return content  # a QuestionError is a ValueError: 422 "messages.N.content: <why>"

    @property
    def text(self) -> str:
        if isinstance(self.content, list):
            return "\n".join(part.text for part in self.content)
        return self.content or ""


class StreamOptions(BaseModel):
    include_usage: bool = False


class ChatRequest(BaseModel):
    """OpenAI's chat completion request. The sampling options (``temperature``, ``max_tokens``, …)
    are accepted and not used: the program's calls are its own. ``n`` must be 1. Every message's
    text is Unicode text without control characters (``check_turn_text``); the last is the
    user's question and meets the question's rules (``validate_question``). A request that breaks
    them is a 422 naming the message, before any work and before a stream starts."""

    model_config = ConfigDict(extra="ignore", json_schema_extra={"examples": [
        {"model": "popqa", "messages": [{"role": "user", "content": "What is Herlyn Espinal's occupation?"}]}]})

    model: str = Field(description="the knowledge base to answer from, as GET /v1/models names it")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_TURNS,
                                        description="the conversation; the last message is the user's question")
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=1, description="one answer per question")
    filter: FilterBody | None = Field(None, description="an extension: read only these documents of the knowledge "
                                                        "base (the OpenAI client's extra_body)")

    @field_validator("messages")
    @classmethod
    def _ends_with_a_question(cls, messages: list[ChatMessage]) -> list[ChatMessage]:
        if messages[-1].role != "user":
            raise ValueError("the last message must be the user's question")
        validate_question(messages[-1].text)  # a QuestionError is a ValueError: 422 with its line
        return messages

    def conversation(self) -> tuple[list[tuple[str, str]], str]:
        """``(earlier turns as (role, text), the question)``: user and assistant turns only."""
        turns = [(m.role, m.text) for m in self.messages[:-1] if m.role in ("user", "assistant") and m.text.strip()]
        return turns, self.messages[-1].text


def citations(result: CRAGResult) -> list[dict]:
    """Each ``[n]`` of the answer: ``number``, ``file`` (the document, no server path), ``page``
    (0: none), ``title`` (the document's or the heading's), ``url`` (a web page's, else "")."""
    return [{"number": c.number, "file": c.source_id.rsplit("#", 1)[0] if not c.url.startswith("http") else "",
             "page": c.page, "title": c.title, "url": c.url if c.url.startswith("http") else "", "label": c.label}
            for c in public(result).citations]


def verdict(result: CRAGResult, request: str) -> dict:
    """The CRAG verdict a chat client can show: the route (``action``), how it ended (``outcome``,
    ``program.types.Ending``), confidence, declined (the honest fallback) and why (``reason``)."""
    return {"action": result.action.value if result.action else None, "outcome": result.outcome.ending.value,
            "confidence": round(result.confidence, 4), "declined": result.fallback, "reason": result.outcome.reason,
            "question": result.question, "asked": result.asked or result.question, "request": request,
            "filter": result.filter}


def _usage(result: CRAGResult) -> dict:
    """OpenAI's usage object over every LM call the question made; ``prompt_tokens_details.
    cached_tokens``: the prompt tokens the LM's cache served (``docs/prompt-cache.md``)."""
    prompt, completion = result.trace.prompt_tokens, result.trace.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": result.trace.cached_tokens}}


def completion(result: CRAGResult, model: str, request: str) -> dict:
    """The ``chat.completion`` object for ``result``."""
    return {"id": f"chatcmpl-{request}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer},
                         "finish_reason": "stop", "logprobs": None}],
            "usage": _usage(result), "citations": citations(result), "crag": verdict(result, request),
            "system_fingerprint": None}


def _words(text: str) -> list[str]:
    """The answer in pieces a client shows as they come: each word with the space before it."""
    return re.findall(r"\s*\S+", text) or [text]


def _chunk(request: str, model: str, created: int, delta: dict, finish: str | None = None, **extra) -> str:
    body = {"id": f"chatcmpl-{request}", "object": "chat.completion.chunk", "created": created, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **extra}
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


async def completion_chunks(runner: QuestionRunner, body: ChatRequest, model: str,
                            options: Options) -> AsyncIterator[str]:
    """The streamed reply as server-sent event lines, ``[DONE]`` last. An error after the first
    chunk is sent as an ``error`` object (OpenAI's streaming errors), then ``[DONE]``."""
    recorder = runner.recorder()
    created = int(time.time())
    history, question = body.conversation()
    task = asyncio.create_task(runner.answer(question, options, recorder, history=history))
    try:
        yield _chunk(recorder.request, model, created, {"role": "assistant", "content": ""})
        while not (await asyncio.wait({task}, timeout=KEEP_ALIVE_SECONDS))[0]:
            yield ": judging\n\n"
        try:
            result = task.result()
        except ServiceError as exc:
            yield f"data: {json.dumps({'error': {'message': str(exc), 'code': exc.status}})}\n\n"
            yield "data: [DONE]\n\n"
            return
        for word in _words(result.answer):
            yield _chunk(recorder.request, model, created, {"content": word})
        yield _chunk(recorder.request, model, created, {}, "stop", citations=citations(result),
                     crag=verdict(result, recorder.request))
        if body.stream_options and body.stream_options.include_usage:
            usage = {"id": f"chatcmpl-{recorder.request}", "object": "chat.completion.chunk", "created": created,
                     "model": model, "choices": [], "usage": _usage(result)}
            yield f"data: {json.dumps(usage)}\n\n"
        yield "data: [DONE]\n\n"
    finally:
        if not task.done():
            task.cancel()


def models(names: list[str], created: int) -> dict:
    """``GET /v1/models``: one model per knowledge base the caller's key may ask, owned by the operator."""
    return {"object": "list", "data": [{"id": name, "object": "model", "created": created, "owned_by": "crag"}
                                       for name in names]}


def unknown_model(name: str, names: list[str]) -> ServiceError:
    return ServiceError(404, f"model {name!r}: no such knowledge base here; this server has "
                             f"{', '.join(repr(n) for n in names)}")
