"""The audit line of a question: who asked (by key name), what it could read, how it ended."""

from __future__ import annotations

import json
import logging

from program.app.service.runner import Options, QuestionRunner
from program.app.tracing import StepRecorder
from program.retrieval.filters import DocumentFilter
from program.types import Citation, CRAGResult, Ending, Outcome


def _result() -> CRAGResult:
    cited = [Citation(number=1, source_id="hr/leave.md#3", url="", text="Staff earn 25 days."),
             Citation(number=2, source_id="hr/leave.md#4", url="", text="Unused days carry over.")]
    return CRAGResult(question="How many days of leave?", answer="25 days [1][2].", citations=cited,
                      outcome=Outcome(Ending.DRAFT, "the draft holds up"), filter={"paths": [["hr/**"]]})


def test_the_audit_line_names_the_key_and_keeps_the_question_only_when_asked(caplog):
    traced: list[dict] = []
    options = Options(key="hr-team", documents=DocumentFilter(paths=(("hr/**",),)))
    for with_question in (False, True):
        runner = QuestionRunner(None, None, name="handbook", audit_questions=with_question, sinks=[traced.append])
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="program.audit"):
            runner._audit("How many days of leave?", options, _result(), StepRecorder(request="r1"), "draft")
        record = json.loads(caplog.records[-1].getMessage())
        expected = {"request": "r1", "key": "hr-team", "knowledge_base": "handbook", "filter": {"paths": [["hr/**"]]},
                    "outcome": "draft", "cited": ["hr/leave.md"]}
        assert record == ({**expected, "question": "How many days of leave?"} if with_question else expected)
        assert traced[-1] == {"event": "audit", **record}
