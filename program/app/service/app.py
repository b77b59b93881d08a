"""The endpoints: ``POST /ask``, ``POST /ask/stream``, ``GET /healthz``, ``GET /`` (the page), ``/docs``, and
OpenAI's ``POST /v1/chat/completions`` and ``GET /v1/models`` (``program.app.service.chat``)."""

# (no ``from __future__ import annotations``: the endpoints' body type is made per server, and
# FastAPI must see it as an object, not a name to look up in this module)

import asyncio
import time
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import FileResponse, JSONResponse, StreamingResponse
from fastapi.sse import EventSourceResponse
from fastapi.staticfiles import StaticFiles

from program.app.service import chat
from program.app.service.access import Access, AccessControl
from program.app.service.keys import ANYONE, Principal
from program.app.service.limits import DEFAULT_READ_TIMEOUT, BodyLimits, error_response, install_error_handlers
from program.app.service.models import (AskRequest, ErrorBody, FilterBody, Health, PublicHealth, QueueHealth,
                                        for_server)
from program.app.service.public import public
from program.app.service.runner import Options, QuestionRunner, ServiceError
from program.app.service.streaming import step_events
from program.types import CRAGResult

PAGE_DIR = Path(__file__).parent / "page"
ERROR_STATUSES = (400, 401, 403, 404, 408, 413, 422, 499, 500, 502, 503, 504)
ERRORS = {status: {"model": ErrorBody} for status in ERROR_STATUSES}
# The stream's errors come before any event, as JSON: said so, or the schema would give them its media type.
STREAM_ERRORS = {status: {"description": "Error", "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/ErrorBody"}}}} for status in ERROR_STATUSES}


def _admission(runners: dict[str, QuestionRunner]):
    """The dependency that parses a request with the server's narrowed body type, picks the
    knowledge base it names (404 for a name the server lacks or the key may not ask) and refuses a
    full queue (503), before any work. Returns ``(body, runner, options)``."""
    every = list(runners.values())
    body_type = for_server(max(r.program.settings.k for r in every), tuple(r.web for r in every),
                           any(r.decide_retrieval for r in every), tuple(runners))

    def admitted(body: body_type, request: Request) -> tuple[AskRequest, QuestionRunner, Options]:
        principal = who(request)
        runner = pick(runners, body.knowledge_base, principal)
        if runner.full:
            raise HTTPException(503, f"busy: {runner.waiting} questions are waiting; try again later")
        return body, runner, Options(k=body.k, web=body.web, decide_retrieval=body.decide_retrieval,
                                     self_check=body.self_check, key=principal.name,
                                     documents=principal.documents(runner.name, _asked(body.filter)))

    return admitted


def who(request: Request) -> Principal:
    """The request's principal, as ``AccessControl`` found it (401 for none: a route reached without a key)."""
    principal = getattr(request.state, "principal", ANYONE)
    if principal is None:
        raise HTTPException(401, "no API key: send Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"})
    return principal


def _asked(body: FilterBody | None):
    return body.documents() if body is not None else None


def pick(runners: dict[str, QuestionRunner], name: str | None, principal: Principal = ANYONE) -> QuestionRunner:
    """The runner of the knowledge base ``name`` (None: the first the operator named that
    ``principal`` may ask).

    Raises:
        ServiceError: 404 naming the knowledge bases ``principal`` may ask, for a name the server
            lacks or one the key may not ask (the same answer: a key learns nothing of the others)."""
    mine = [n for n in runners if principal.may_ask(n)]
    if not mine:
        raise ServiceError(404, "this key may ask no knowledge base this server has")
    if name is None:
        return runners[mine[0]]
    if name not in mine:
        raise chat.unknown_model(name or "", mine)
    return runners[name]


async def _until_done(task: asyncio.Task, request: Request):
    """``task``'s result; a client that goes away first stops it (499)."""
    try:
        while not (await asyncio.wait({task}, timeout=0.25))[0]:
            if await request.is_disconnected():
                raise HTTPException(499, "stopped: the client went away")
        return task.result()
    finally:
        if not task.done():
            task.cancel()


def _add_chat_routes(app: FastAPI, runners: dict[str, QuestionRunner], started: int) -> None:
    """OpenAI's ``POST /v1/chat/completions`` and ``GET /v1/models`` over ``runners`` (model name -> runner)."""

    @app.post("/v1/chat/completions", responses=ERRORS, summary="OpenAI's chat API: answer the last message")
    async def chat_completions(body: chat.ChatRequest, request: Request):
        """A ``chat.completion`` (or with ``stream: true`` its chunks, then ``[DONE]``) whose
        message is the answer with its ``[n]`` markers or the decline; ``citations`` and ``crag``
        (action, outcome, confidence, declined, reason, the standalone question, the filter) are
        extra fields. An extra body field ``filter`` reads only part of the knowledge base."""
        principal = who(request)
        chosen = pick(runners, body.model, principal)
        if chosen.full:
            raise HTTPException(503, f"busy: {chosen.waiting} questions are waiting; try again later")
        options = Options(key=principal.name, documents=principal.documents(chosen.name, _asked(body.filter)))
        if body.stream:
            return StreamingResponse(chat.completion_chunks(chosen, body, body.model, options),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        recorder = chosen.recorder()
        history, question = body.conversation()
        task = asyncio.create_task(chosen.answer(question, options, recorder, history=history))
        result = await _until_done(task, request)
        return JSONResponse(chat.completion(result, body.model, recorder.request),
                            headers={"X-Request-ID": recorder.request})

    @app.get("/v1/models", summary="OpenAI's model list: one model per knowledge base the key may ask")
    async def list_models(request: Request) -> dict:
        return chat.models([n for n in runners if who(request).may_ask(n)], started)


def create_app(runners: dict[str, QuestionRunner], infos: dict[str, dict] | None = None,
               read_timeout: float = DEFAULT_READ_TIMEOUT, access: Access | None = None) -> FastAPI:
    """The FastAPI app answering from each knowledge base of ``runners`` (its name, as the operator
    gave it and as ``/v1/models`` lists it -> the runner of its program; the first is the default);
    ``infos`` what ``/healthz`` reports of each loaded program (``lm``, ``embedded_lm``,
    ``knowledge_base``, ``compiled``, ``web``, ``thresholds``, ``judges``: names, never paths or
    addresses; without the key, on a server that has one, only ``status``); ``read_timeout`` bounds a
    request body's arrival (408); ``access`` the key and hosts (``program.app.service.access``;
    default: no key, any host)."""
    app = FastAPI(title="CRAG with Self-RAG checks",
                  description="Corrective RAG as a compiled DSPy program: ask, watch each step, read why it answered.",
                  version="0.1.0")
    infos = infos if infos is not None else {}  # the same dict: a reload updates it in place
    app.state.runners, app.state.infos = runners, infos
    app.add_middleware(BodyLimits, read_timeout=read_timeout)
    access = access or Access()
    app.add_middleware(AccessControl, access=access)  # added last: runs first
    install_error_handlers(app)
    Asked = Annotated[tuple[AskRequest, QuestionRunner, Options], Depends(_admission(runners))]

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError):
        detail = str(exc) + (f" (request {exc.request})" if exc.request else "")
        return error_response(request.url.path, exc.status, detail,
                              {"X-Request-ID": exc.request} if exc.request else None)

    @app.post("/ask", response_model=CRAGResult, responses=ERRORS, summary="Answer a question; the whole result")
    async def ask(asked: Asked, request: Request, response: Response) -> CRAGResult:
        """The same JSON as ``python -m program ask --json``: answer, action, grades, strips, claims, trace."""
        body, runner, options = asked
        recorder = runner.recorder()
        response.headers["X-Request-ID"] = recorder.request
        task = asyncio.create_task(runner.answer(body.question, options, recorder))
        return public(await _until_done(task, request))  # no server path in it

    @app.post("/ask/stream", response_class=EventSourceResponse, responses=STREAM_ERRORS,
              summary="Answer a question, streaming one event per step")
    async def ask_stream(asked: Asked):
        """Server-sent events: question, retrieved, graded, action, rewrite, web, strips, answer,
        claims, usefulness as they happen; then result (or error), then done."""
        body, runner, options = asked
        async for event in step_events(runner, body.question, options):
            yield event

    _add_chat_routes(app, runners, int(time.time()))
    _add_health_routes(app, runners, infos, access)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", media_type="text/html")

    app.mount("/page", StaticFiles(directory=PAGE_DIR), name="page")
    return app


def _add_health_routes(app: FastAPI, runners: dict[str, QuestionRunner], infos: dict[str, dict],
                       access: Access) -> None:
    """``GET`` and ``HEAD /healthz`` over ``runners`` and what ``infos`` says of their programs (a
    reload updates ``infos`` in place)."""

    async def healthz(request: Request) -> Health | PublicHealth:
        """Ready or busy; with the key (or on a server without one) also what is loaded, by name,
        and the queue. Without the key a load balancer learns ``status`` and nothing else."""
        principal = access.principal(request.headers.get("authorization", ""))
        mine = {n: r for n, r in runners.items() if principal is not None and principal.may_ask(n)}
        if not mine:
            return PublicHealth(status=_health(runners, infos).status)
        return _health(mine, infos)  # a scoped key hears only of the knowledge bases it may ask

    # one route per method: one route for both gives both one operation id (FastAPI's "Duplicate Operation ID")
    for route in (app.get, app.head):
        route("/healthz", response_model=Health | PublicHealth,
              summary="Ready or busy; with the key what is loaded (by name) and the queue")(healthz)


def _health(runners: dict[str, QuestionRunner], infos: dict[str, dict]) -> Health:
    """The default knowledge base's health (the first), with every knowledge base's in ``knowledge_bases``."""
    default = next(iter(runners))
    runner = runners[default]
    queue = QueueHealth(running=runner.running, waiting=runner.waiting, concurrency=runner.concurrency,
                        max_queue=runner.max_queue)
    others = [{**infos.get(name, {}).get("knowledge_base", {"model": name}), "web": r.web,
               "thresholds": infos.get(name, {}).get("thresholds", {}), "status": "busy" if r.full else "ready"}
              for name, r in runners.items()]
    return Health(**infos.get(default, {}), status="busy" if runner.full else "ready", queue=queue,
                  answered=sum(r.answered for r in runners.values()), failed=sum(r.failed for r in runners.values()),
                  knowledge_bases=others)
