"""The endpoints: ``POST /ask``, ``POST /ask/stream``, ``GET /healthz``, ``GET /`` (the page), ``/docs``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

from fastapi import Depends, FastAPI, HTTPException, Request, Response
from fastapi.responses import FileResponse, JSONResponse
from fastapi.sse import EventSourceResponse
from fastapi.staticfiles import StaticFiles

from program.app.service.limits import BodySizeLimit, install_error_handlers
from program.app.service.models import AskRequest, ErrorBody, Health, QueueHealth
from program.app.service.runner import Options, QuestionRunner, ServiceError
from program.app.service.streaming import step_events
from program.types import CRAGResult

PAGE_DIR = Path(__file__).parent / "page"
ERROR_STATUSES = (400, 413, 422, 499, 500, 502, 503, 504)
ERRORS = {status: {"model": ErrorBody} for status in ERROR_STATUSES}
# The stream's errors come before any event, as JSON: said so, or the schema would give them its media type.
STREAM_ERRORS = {status: {"description": "Error", "content": {"application/json": {
    "schema": {"$ref": "#/components/schemas/ErrorBody"}}}} for status in ERROR_STATUSES}


def _runner(request: Request) -> QuestionRunner:
    return request.app.state.runner


def admitted(body: AskRequest, runner: Annotated[QuestionRunner, Depends(_runner)]) -> AskRequest:
    """Refuse before any work: a web backend that cannot be set up (400), a full queue (503)."""
    try:
        runner.backend(body.web)
    except ServiceError as exc:
        raise HTTPException(exc.status, str(exc)) from None
    if runner.waiting >= runner.max_queue:
        raise HTTPException(503, f"busy: {runner.waiting} questions are waiting; try again later")
    return body


def _options(body: AskRequest) -> Options:
    return Options(k=body.k, web=body.web, decide_retrieval=body.decide_retrieval, self_check=body.self_check)


def create_app(runner: QuestionRunner, info: dict | None = None) -> FastAPI:
    """The FastAPI app answering with ``runner``; ``info`` is what ``/healthz`` reports of the
    loaded program (``lm``, ``embedded_lm``, ``knowledge_base``, ``compiled``, ``web``, ``thresholds``)."""
    app = FastAPI(title="CRAG with Self-RAG checks",
                  description="Corrective RAG as a compiled DSPy program: ask, watch each step, read why it answered.",
                  version="0.1.0")
    app.state.runner, app.state.info = runner, dict(info or {})
    app.add_middleware(BodySizeLimit)
    install_error_handlers(app)

    @app.exception_handler(ServiceError)
    async def _service_error(request: Request, exc: ServiceError):
        return JSONResponse({"detail": str(exc)}, status_code=exc.status)

    @app.post("/ask", response_model=CRAGResult, responses=ERRORS, summary="Answer a question; the whole result")
    async def ask(body: Annotated[AskRequest, Depends(admitted)], request: Request, response: Response) -> CRAGResult:
        """The same JSON as ``python -m program ask --json``: answer, action, grades, strips, claims, trace."""
        recorder = runner.recorder()
        response.headers["X-Request-ID"] = recorder.request
        task = asyncio.create_task(runner.answer(body.question, _options(body), recorder))
        try:
            while not (await asyncio.wait({task}, timeout=0.25))[0]:
                if await request.is_disconnected():
                    raise HTTPException(499, "stopped: the client went away")
            return task.result()
        finally:
            if not task.done():
                task.cancel()

    @app.post("/ask/stream", response_class=EventSourceResponse, responses=STREAM_ERRORS,
              summary="Answer a question, streaming one event per step")
    async def ask_stream(body: Annotated[AskRequest, Depends(admitted)]):
        """Server-sent events: question, retrieved, graded, action, rewrite, web, strips, answer,
        claims, usefulness as they happen; then result (or error), then done."""
        async for event in step_events(runner, body.question, _options(body)):
            yield event

    @app.get("/healthz", response_model=Health, summary="What is loaded, and the queue")
    async def healthz() -> Health:
        queue = QueueHealth(running=runner.running, waiting=runner.waiting, concurrency=runner.concurrency,
                            max_queue=runner.max_queue)
        return Health(**app.state.info, queue=queue, answered=runner.answered, failed=runner.failed)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", media_type="text/html")

    app.mount("/page", StaticFiles(directory=PAGE_DIR), name="page")
    return app
