"""Request and response bodies of the service (pydantic models; the result is ``CRAGResult`` itself)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model, field_validator, model_validator

from program.app.flags import MAX_K
from program.guards.question import MAX_QUESTION_CHARS, QUESTION_PATTERN, validate_question
from program.retrieval.filters import DocumentFilter
from program.web.config import BACKEND_NAMES


def _whole_number(value):
    # JSON Schema's integer takes 1.0 (a number whose fraction is zero); strict pydantic would not
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def whole_number(low: int, high: int):
    """An integer in ``[low, high]`` as JSON Schema reads one: ``3`` and ``3.0``, not ``"3"`` or ``true``."""
    # the bounds before the validator: after it, the schema would say "ge"/"le", not minimum/maximum
    return Annotated[int, Field(ge=low, le=high), BeforeValidator(_whole_number)]


class FilterBody(BaseModel):
    """Read only part of the knowledge base (``program.retrieval.filters.DocumentFilter``): every
    field given must hold. A key's scope still applies: the filter narrows it, never widens it."""

    model_config = ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [
        {"paths": ["runbooks/**"], "types": ["md"]}, {"paths": ["manual.pdf"], "pages": "10-20"}]})

    paths: list[str] | None = Field(None, max_length=32, description="path globs relative to the indexed folder; a "
                                                                     "file matching any is kept ('hr/**', '*.pdf')")
    types: list[str] | None = Field(None, max_length=32, description="file types kept: 'pdf', 'md', 'docx' ...")
    pages: str | None = Field(None, max_length=32, description="PDF pages kept, '3-10' or '5'")
    modified_since: str | None = Field(None, max_length=32, description="files modified on or after this day, "
                                                                        "YYYY-MM-DD (UTC)")
    modified_until: str | None = Field(None, max_length=32, description="files modified on or before this day")

    @model_validator(mode="after")
    def _usable(self):
        self.documents()  # a FilterError is a ValueError: a 422 with its line
        return self

    def documents(self) -> DocumentFilter | None:
        """The filter, or None when it keeps everything."""
        return DocumentFilter.parse(self.model_dump(exclude_none=True))


class AskRequest(BaseModel):
    """A question and its options. Unknown fields are refused (422), as are out-of-range values and
    values of another JSON type (strict: ``"3"`` is no integer, ``1`` no boolean).

    Options left out (null) take the server's settings (its ``-k``, ``--web``,
    ``--decide-retrieval``; the self-check is on). A server narrows this schema to what its
    operator allows (``for_server``): a request may ask for less, never more.
    """

    model_config = ConfigDict(extra="forbid", strict=True,
                              json_schema_extra={"examples": [{"question": "What is Herlyn Espinal's occupation?"}]})

    question: str = Field(description=f"the question; not empty, at most {MAX_QUESTION_CHARS} characters "
                                      "once stripped, "
                                      "no control character but tab and line breaks",
                          max_length=4 * MAX_QUESTION_CHARS,
                          # documents validate_question's rules; validate_question enforces them
                          json_schema_extra={"pattern": QUESTION_PATTERN})
    k: whole_number(1, MAX_K) | None = Field(None, description="passages retrieved and graded")
    web: Literal[BACKEND_NAMES] | None = Field(None, description="web backend for the corrective path; "
                                                             "'none' for no web")
    decide_retrieval: bool | None = Field(None, description="first ask whether the question needs sources at all")
    self_check: bool | None = Field(None, description="check every claim of the answer against its strips "
                                                      "(Self-RAG's IsSup); false answers as generated")
    knowledge_base: str | None = Field(None, description="the knowledge base to answer from, by the name the "
                                                        "operator gave it (GET /v1/models); default the first")
    filter: FilterBody | None = Field(None, description="read only these documents of the knowledge base (the "
                                                        "web is not filtered)")

    @field_validator("question")
    @classmethod
    def _question_rules(cls, value: str) -> str:
        return validate_question(value)  # QuestionError is a ValueError: a 422 with its message


def _a_boolean(value):
    # Literal[False] alone would take 0 for false
    if value is not None and not isinstance(value, bool):
        raise ValueError("Input should be a valid boolean")
    return value


def for_server(k: int, webs: str | tuple[str, ...], decide_retrieval: bool,
               names: tuple[str, ...] = ()) -> type[AskRequest]:
    """``AskRequest`` narrowed to what a server started with ``-k k``, ``--web`` (its knowledge
    bases' backends, ``webs``) and ``--decide-retrieval`` (or not) may do: ``k`` at most the
    server's, ``web`` 'none' or a backend the server uses, ``decide_retrieval`` true only where the
    operator turned it on (it may answer without sources), ``knowledge_base`` one of ``names``
    (the knowledge bases served). The OpenAPI schema then states exactly what a client may ask for."""
    webs = tuple(dict.fromkeys(("none", *((webs,) if isinstance(webs, str) else webs))))
    decide = bool if decide_retrieval else Annotated[Literal[False], BeforeValidator(_a_boolean)]
    return create_model(
        "AskRequest", __base__=AskRequest, __doc__=AskRequest.__doc__,
        k=(whole_number(1, k) | None, Field(None,
                             description=f"passages retrieved and graded; at most {k} (the server's)")),
        web=(Literal[webs] | None, Field(None, description="'none' for no web; else the server's own backend only")),
        decide_retrieval=(decide | None, Field(None, description="first ask whether the question needs sources at "
                                                                 "all; true only on a server started with it")),
        knowledge_base=(Literal[names] | None if names else str | None,
                        Field(None, description="the knowledge base to answer from, by the name the operator gave "
                                                "it (default the first)")))


class ErrorBody(BaseModel):
    """Every error answer: one line a client can show."""

    detail: str = Field(description="what went wrong, e.g. 'question: the question is empty'")


class QueueHealth(BaseModel):
    """Questions being answered and waiting."""

    running: int = Field(description="questions being answered now")
    waiting: int = Field(description="questions queued for a free slot (with the embedded model: for the model)")
    concurrency: int = Field(description="questions answered at once")
    max_queue: int = Field(description="questions waiting at most; beyond it requests get 503")


class PublicHealth(BaseModel):
    """``/healthz`` for a caller without the key, on a server that has one (a load balancer): ready
    or busy, and nothing naming a folder, file, model, table or threshold."""

    status: Literal["ready", "busy"] = Field(description="ready, or busy: the queue is full and questions get 503")


class Health(BaseModel):
    """What the service loaded and how busy it is (with the key, or on a server without one)."""

    status: Literal["ready", "busy"] = Field(description="ready, or busy: the queue is full and questions get 503")
    lm: str = Field(description="the language model, e.g. embedded-1.5b or openai/gpt-4o-mini (never its address)")
    embedded_lm: bool = Field(description="true for the in-process model (requests queue for it)")
    knowledge_base: dict = Field(description="its name (the corpus folder's or file's name, the database table's, "
                                             "never a path), its model name on /v1/chat/completions, its "
                                             "chunks and documents, when the build serving was made (UTC) and "
                                             "how many new builds were switched to since start")
    compiled: dict | None = Field(description="the compile loaded (its folder's name, LM, date, DSPy version, dev "
                                              "score); null when the signatures are uncompiled")
    web: str = Field(description="the default web backend ('none' when off)")
    thresholds: dict = Field(description="the evaluator's lower and upper thresholds")
    judges: dict = Field(default_factory=dict,
                         description="who decides each judgment (passage, strip, support, usefulness: trained, lm or "
                                     "cascade) and whether the judges were adapted to this knowledge base")
    queue: QueueHealth
    knowledge_bases: list[dict] = Field(default_factory=list,
                                        description="every knowledge base served (name, model, chunks, web, "
                                                    "thresholds, status); the fields above are the first's")
    answered: int = Field(description="questions answered since start")
    failed: int = Field(description="questions that ended in an error since start")
