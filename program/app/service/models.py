"""Request and response bodies of the service (pydantic models; the result is ``CRAGResult`` itself)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from program.guards.question import MAX_QUESTION_CHARS, QUESTION_PATTERN, validate_question
from program.web.config import BACKEND_NAMES

MAX_K = 20


class AskRequest(BaseModel):
    """A question and its options. Unknown fields are refused (422), as are out-of-range values.

    Options left out (null) take the server's settings (its ``-k``, ``--web``,
    ``--decide-retrieval``; the self-check is on by default).
    """

    model_config = ConfigDict(extra="forbid",
                              json_schema_extra={"examples": [{"question": "What is Herlyn Espinal's occupation?"}]})

    question: str = Field(description=f"the question; not empty, at most {MAX_QUESTION_CHARS} characters once stripped, "
                                      "no control character but tab and line breaks",
                          max_length=4 * MAX_QUESTION_CHARS,
                          # documents validate_question's rules; validate_question enforces them
                          json_schema_extra={"pattern": QUESTION_PATTERN})
    k: int | None = Field(None, ge=1, le=MAX_K, description="passages retrieved and graded")
    web: Literal[BACKEND_NAMES] | None = Field(None, description="web backend for the corrective path; 'none' for no web")
    decide_retrieval: bool | None = Field(None, description="first ask whether the question needs sources at all")
    self_check: bool | None = Field(None, description="check every claim of the answer against its strips "
                                                      "(Self-RAG's IsSup); false answers as generated")

    @field_validator("question")
    @classmethod
    def _question_rules(cls, value: str) -> str:
        return validate_question(value)  # QuestionError is a ValueError: a 422 with its message


class ErrorBody(BaseModel):
    """Every error answer: one line a client can show."""

    detail: str = Field(description="what went wrong, e.g. 'question: the question is empty'")


class QueueHealth(BaseModel):
    """Questions being answered and waiting."""

    running: int = Field(description="questions being answered now")
    waiting: int = Field(description="questions queued for a free slot (with the embedded model: for the model)")
    concurrency: int = Field(description="questions answered at once")
    max_queue: int = Field(description="questions waiting at most; beyond it requests get 503")


class Health(BaseModel):
    """What the service loaded and how busy it is."""

    status: Literal["ok"] = "ok"
    lm: str = Field(description="the language model, e.g. embedded-1.5b or openai/gpt-4o-mini")
    embedded_lm: bool = Field(description="true for the in-process model (requests queue for it)")
    knowledge_base: dict = Field(description="source, index folder and number of chunks")
    compiled: dict | None = Field(description="the compile loaded (folder, LM, date, DSPy version, dev score); "
                                              "null when the signatures are uncompiled")
    web: str = Field(description="the default web backend ('none' when off)")
    thresholds: dict = Field(description="the evaluator's lower and upper thresholds")
    judges: dict = Field(default_factory=dict,
                         description="who decides each judgment (passage, strip, support, usefulness: trained, lm or "
                                     "cascade) and whether the judges were adapted to this knowledge base")
    queue: QueueHealth
    answered: int = Field(description="questions answered since start")
    failed: int = Field(description="questions that ended in an error since start")
