"""Limits and error bodies: the request body cap, and every error as ``{"detail": "one line"}``."""

from __future__ import annotations

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

# A question is at most 2,000 characters: 16 KB holds it, escaped, with every option.
MAX_BODY_BYTES = 16 * 1024


def _too_large() -> str:
    return f"the request body is over the {MAX_BODY_BYTES}-byte limit"


class BodySizeLimit:
    """ASGI middleware capping request bodies at ``MAX_BODY_BYTES``: a body announced larger
    (``Content-Length``) gets a JSON 413 before it is read; a chunked one is counted as it
    arrives and refused with the same 413 (an ``HTTPException`` the handlers below answer)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length", b"")
        if length.isdigit() and int(length) > MAX_BODY_BYTES:
            return await JSONResponse({"detail": _too_large()}, status_code=413)(scope, receive, send)
        received = 0

        async def counted():
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > MAX_BODY_BYTES:
                raise HTTPException(413, _too_large())
            return message

        return await self.app(scope, counted, send)


def _one_line(error: dict) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "body"
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if cause is not None else error.get("msg", "invalid")
    if error.get("type") == "extra_forbidden":
        message = "unknown option"
    if error.get("type") == "json_invalid":
        return "the body is not valid JSON"
    return f"{where}: {message}"


def install_error_handlers(app: FastAPI) -> None:
    """422 for a body that breaks the rules, one line per problem joined by '; '; HTTP errors
    keep their status with ``{"detail": ...}``."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return JSONResponse({"detail": "; ".join(_one_line(e) for e in exc.errors())}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        detail = _too_large() if exc.status_code == 413 else str(exc.detail)
        return JSONResponse({"detail": detail}, status_code=exc.status_code, headers=exc.headers)
