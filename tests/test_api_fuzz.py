"""The HTTP API fuzzed from its own OpenAPI schema against a real ``serve`` process (the served fake
LM behind it, ``--web none``).

- Requests the schema allows: no 5xx, status, content type and body as the schema says, and an
  answer (200). The schema is the server's own: it offers only the options its operator allows
  (``k`` up to the server's, web ``none``), so nothing it allows is refused.
- Requests the schema forbids: refused with a 4xx.
- Every error is a one-line JSON body ``{"detail": "..."}``.

Bounded: at most ``EXAMPLES`` generated requests per operation and mode (about two minutes in
all on 2 cores). schemathesis' pytest plugin does not run under this pytest; its strategies do.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

EXAMPLES = 30
ENDPOINTS = ["GET /healthz", "GET /v1/models", "POST /ask", "POST /ask/stream"]
# the chat endpoint's positive requests name models at random (404s): the openai client drives it (test_chat_api.py)
ALL_ENDPOINTS = sorted(ENDPOINTS + ["HEAD /healthz", "POST /v1/chat/completions"])


def one_line_json_error(response) -> None:
    """An error answer (4xx, 5xx) is ``{"detail": "<one line>"}``."""
    if response.status_code < 400:
        return
    body = json.loads(response.text)  # a body that is not JSON fails here, with its text
    detail = body.get("detail") if isinstance(body, dict) else None
    assert isinstance(detail, str) and detail and "\n" not in detail, (
        f"{response.status_code}: not a one-line JSON error: {response.text[:300]!r}")


def _operation(service, endpoint):
    schema = schemathesis.openapi.from_url(f"{service.base}/openapi.json")
    (operation,) = [op for op in (r.ok() for r in schema.get_all_operations())
                    if f"{op.method.upper()} {op.path}" == endpoint]
    return operation


def _fuzz(operation, mode, check) -> list[int]:
    seen = []

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        response = case.call(timeout=30)
        seen.append(response.status_code)
        check(case, response)
        one_line_json_error(response)

    run()
    return seen


def test_the_schema_names_every_endpoint(service):
    schema = schemathesis.openapi.from_url(f"{service.base}/openapi.json")
    assert sorted(f"{r.ok().method.upper()} {r.ok().path}" for r in schema.get_all_operations()) == ALL_ENDPOINTS


@pytest.mark.parametrize("endpoint", ENDPOINTS)
def test_every_request_the_schema_allows_is_answered_as_the_schema_says(endpoint, service):
    def check(case, response):
        # no 5xx, the documented status, content type and body schema
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
        assert response.status_code == 200, f"{response.status_code} {response.text[:300]}"

    seen = _fuzz(_operation(service, endpoint), GenerationMode.POSITIVE, check)
    assert seen.count(200) >= min(len(seen), 5)  # the valid requests were answered, not all refused


@pytest.mark.parametrize("endpoint", ["POST /ask", "POST /ask/stream", "POST /v1/chat/completions"])
def test_every_request_the_schema_forbids_is_refused_in_one_line(endpoint, service):
    def check(case, response):
        # (schemathesis' own rejection check does not count 413, the body-size refusal, as one)
        case.validate_response(response, excluded_checks=[positive_data_acceptance, negative_data_rejection])
        assert 400 <= response.status_code < 500, f"{response.status_code} for {case.body!r}"

    seen = _fuzz(_operation(service, endpoint), GenerationMode.NEGATIVE, check)
    assert len(seen) >= 10
