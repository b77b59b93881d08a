"""``POST /ask/stream``: the question's step events as server-sent events, as they happen.

Each event of ``program.app.tracing`` (``question``, ``retrieved``, ``graded``, ``action``,
``rewrite``, ``web``, ``strips``, ``answer``, ``claims``, ``usefulness``) goes out as soon as the
worker thread records it, named by its ``event`` field with its JSON as data; then ``result``
(the whole result, as ``POST /ask`` returns it) or ``error`` (``status`` and ``detail``), then
``done``. A client that disconnects cancels the question: it stops before its next step.
Events reach the client as ``public`` makes them: no knowledge-base file's path.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi.sse import ServerSentEvent

from program.app.service.public import public
from program.app.service.runner import Options, QuestionRunner


async def step_events(runner: QuestionRunner, question: str, options: Options) -> AsyncIterator[ServerSentEvent]:
    """Yield the question's events, then ``done``; cancelling the iteration stops the question."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    recorder = runner.recorder(lambda event: loop.call_soon_threadsafe(queue.put_nowait, public(event)))
    task = asyncio.create_task(runner.answer(question, options, recorder))
    task.add_done_callback(lambda _: queue.put_nowait(None))  # after every event the thread scheduled
    try:
        number = 0
        while (event := await queue.get()) is not None:
            yield ServerSentEvent(event=event["event"], data=event, id=str(number))
            number += 1
        if not task.cancelled():
            task.exception()  # a failure was already sent as the "error" event
        yield ServerSentEvent(event="done", data={"event": "done", "request": recorder.request}, id=str(number))
    finally:
        if not task.done():
            task.cancel()
