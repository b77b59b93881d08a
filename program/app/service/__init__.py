"""The HTTP service: ``python -m program serve`` (FastAPI on uvicorn).

One loaded CRAG program answers every request. ``POST /ask`` returns the whole result (the
JSON of ``ask --json``); ``POST /ask/stream`` streams one server-sent event per step as it
happens (``program.app.tracing``), then the result and ``done``; ``GET /healthz`` names the LM,
the knowledge base and the compile loaded, and the queue; ``GET /`` is a page that watches the
program judge; ``/docs`` is the OpenAPI page.

Files: ``models`` (request and response bodies), ``runner`` (one question on the shared
program: per-request DSPy settings, the queue, timeouts, cancellation), ``streaming`` (the
event stream), ``limits`` (body size cap, error bodies), ``app`` (the endpoints), ``run``
(``serve``: load, then uvicorn), ``page/`` (the page's HTML, CSS and JavaScript).
"""

from program.app.service.app import create_app

__all__ = ["create_app"]
