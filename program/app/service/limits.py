"""Limits and error bodies: the request body's size cap and read timeout, and every error as
``{"detail": "one line"}``."""

from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

# A question is at most 2,000 characters: 16 KB holds it, escaped, with every option.
MAX_BODY_BYTES = 16 * 1024
# A chat front-end sends the whole conversation with every question.
CHAT_MAX_BODY_BYTES = 256 * 1024
DEFAULT_READ_TIMEOUT = 30.0
OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                      404: "not_found_error", 408: "timeout", 413: "invalid_request_error",
                      422: "invalid_request_error", 429: "rate_limit_error", 503: "overloaded_error"}

log = logging.getLogger("program.service")


def body_limit(path: str) -> int:
    """The largest request body ``path`` takes, in bytes."""
    return CHAT_MAX_BODY_BYTES if path.startswith("/v1/") else MAX_BODY_BYTES


def _too_large(path: str = "") -> str:
    return f"the request body is over the {body_limit(path)}-byte limit"


def error_body(path: str, status: int, detail: str) -> dict:
    """Every error's body: ``{"detail": one line}``; on the OpenAI routes (``/v1/…``) also
    OpenAI's ``{"error": {"message", "type", "code"}}``, which its clients show."""
    body = {"detail": detail}
    if path.startswith("/v1/"):
        body["error"] = {"message": detail, "type": OPENAI_ERROR_TYPES.get(status, "api_error"), "code": status}
    return body


def error_response(path: str, status: int, detail: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(error_body(path, status, detail), status_code=status, headers=headers)


class BodyLimits:
    """ASGI middleware bounding request bodies.

    Size: a body announced larger than ``MAX_BODY_BYTES`` (``Content-Length``) gets a JSON 413
    before it is read; a chunked one is counted as it arrives and refused with the same 413.
    Time: the whole body must arrive within ``read_timeout`` seconds of the app's first read, else
    408 and the connection is closed (a client that announces a body and sends it a byte at a
    time, or nothing, holds no worker).
    Both are ``HTTPException``s the handlers below answer.
    """

    def __init__(self, app, read_timeout: float = DEFAULT_READ_TIMEOUT):
        self.app, self.read_timeout = app, read_timeout

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        path, limit = scope["path"], body_limit(scope["path"])
        if length.isdigit() and int(length) > limit:
            return await error_response(path, 413, _too_large(path))(scope, receive, send)
        received, complete, deadline = 0, False, None

        async def bounded():
            nonlocal received, complete, deadline
            if complete:  # after the body: waiting for a disconnect has no deadline
                return await receive()
            loop = asyncio.get_running_loop()
            deadline = deadline or loop.time() + self.read_timeout  # the whole body's, not each part's
            try:
                message = await asyncio.wait_for(receive(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                raise HTTPException(408, f"the request body did not arrive within {self.read_timeout:g} s",
                                    headers={"Connection": "close"}) from None
            received += len(message.get("body", b""))
            complete = message["type"] != "http.request" or not message.get("more_body", False)
            if received > limit:
                raise HTTPException(413, _too_large(path))
            return message

        return await self.app(scope, bounded, send)


def _one_line(error: dict) -> str:
    """One problem of a 422 as ``"<field>: <message>"`` on one line: a control character in a
    client's field name or value is written escaped (``\\n``)."""
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if cause is not None else error.get("msg", "invalid")
    if error.get("type") == "extra_forbidden":
        message = "unknown option"
    if error.get("type") == "json_invalid":
        return "the body is not valid JSON"
    line = f"{where}: {message}"
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


def install_error_handlers(app: FastAPI) -> None:
    """422 for a body that breaks the rules or does not parse (one line per problem joined by '; ');
    HTTP errors keep their status with ``{"detail": ...}``; anything unexpected is a 500 saying
    no more than that (its traceback goes to the operator's log)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return error_response(request.url.path, 422, "; ".join(_one_line(e) for e in exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        path = request.url.path
        if exc.status_code == 400 and isinstance(exc.__cause__, RecursionError):
            return error_response(path, 422, "the body is not valid JSON: nested too deeply")
        if exc.status_code == 400 and isinstance(exc.__cause__, ValueError):
            # FastAPI's "error parsing the body": bytes that are not UTF-8, so not JSON
            return error_response(path, 422, "the body is not valid JSON")
        detail = _too_large(path) if exc.status_code == 413 else str(exc.detail)
        return error_response(path, exc.status_code, detail, exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception):
        log.error("%s %s: unexpected %s: %s", request.method, request.url.path, type(exc).__name__, exc)
        return error_response(request.url.path, 500, "internal error")
