"""uvicorn's HTTP/1.1 protocol (h11) with a deadline for the request's head, and its own errors as JSON.

uvicorn closes a connection that stays idle after a response (``timeout_keep_alive``), but not one
that never sends a request, or sends its request line and headers a byte at a time: 200 such
connections held the server's sockets for minutes. Here the request line and headers must
arrive within ``HEAD_TIMEOUT`` seconds of the connection (or of the first byte after a response);
a connection that sent nothing is closed, one that sent part of a head gets a 408. The body has
its own deadline (``program.app.service.limits.BodyLimits``). A request h11 cannot parse gets
the service's error body, ``{"detail": "one line"}``, where uvicorn sends plain text.

The request line and headers may take at most ``MAX_HEAD_BYTES``, however they arrive: h11's own
cap (``max_incomplete_event_size``) bounds only what it buffers while a head is incomplete, so a
20 KB head arriving in one read was parsed whole. Each parsed head is measured here too; over the
cap, in pieces or at once, it is a 400 saying so.
"""

from __future__ import annotations

import asyncio
import json

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 30.0  # as long as a body may take (serve --read-timeout)
MAX_HEAD_BYTES = 16 * 1024  # h11's default max_incomplete_event_size, which uvicorn keeps
HEAD_TOO_LARGE = f"the request line and headers are over the {MAX_HEAD_BYTES}-byte limit"


def head_size(request: h11.Request) -> int:
    """The bytes of ``request``'s head as sent: the request line, each header line, the blank line
    (without the spaces h11 strips around a value)."""
    line = len(request.method) + len(request.target) + len(b"HTTP/") + len(request.http_version) + 4
    return line + sum(len(name) + len(value) + 4 for name, value in request.headers.raw_items()) + 2


def _raw_response(status: str, detail: str) -> bytes:
    body = json.dumps({"detail": detail}).encode()
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """``uvicorn.Config(app, http=GuardedH11Protocol)``: h11 with the head's deadline and JSON 400s."""

    head_timeout = HEAD_TIMEOUT

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._refusal: str | None = None
        self.conn.next_event = self._next_event_within_limit  # every head uvicorn reads, pipelined too
        self._arm()

    def _next_event_within_limit(self):
        """h11's next event, a ``RemoteProtocolError`` for a head over ``MAX_HEAD_BYTES`` (uvicorn
        answers it with ``send_400_response``, which says why)."""
        try:
            event = h11.Connection.next_event(self.conn)
        except h11.RemoteProtocolError as exc:
            if exc.error_status_hint == 431:  # h11's buffer cap: an incomplete head over the limit
                self._refusal = HEAD_TOO_LARGE
            raise
        if isinstance(event, h11.Request) and head_size(event) > MAX_HEAD_BYTES:
            self._refusal = HEAD_TOO_LARGE
            raise h11.RemoteProtocolError(HEAD_TOO_LARGE, error_status_hint=431)
        return event

    def data_received(self, data: bytes) -> None:
        if self._waiting_for_head():
            if self._head_deadline is None:  # the first byte after a response: a new head's deadline
                self._arm()
            self._head_bytes += len(data)
        super().data_received(data)
        if not self._waiting_for_head():
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        self._disarm()
        detail = self._refusal or f"not an HTTP request this server reads: {msg}"
        self.transport.write(_raw_response("400 Bad Request", detail))
        self.transport.close()

    def _waiting_for_head(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self._head_bytes = 0
        self._head_deadline = self.loop.call_later(self.head_timeout, self._head_too_slow)

    def _disarm(self) -> None:
        if getattr(self, "_head_deadline", None) is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self.transport.is_closing() or not self._waiting_for_head():
            return
        if self._head_bytes:
            self.transport.write(_raw_response(
                "408 Request Timeout", f"the request line and headers did not arrive within {self.head_timeout:g} s"))
        self.transport.close()


def guarded_protocol(head_timeout: float) -> type[GuardedH11Protocol]:
    """``GuardedH11Protocol`` whose head must arrive within ``head_timeout`` seconds (``--read-timeout``)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"head_timeout": head_timeout})
