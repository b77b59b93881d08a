"""The reader's few-shot demos are kept only where the knowledge base holds their passages."""

from __future__ import annotations

import json

import dspy

from program.app.compiled import load_compiled
from program.app.demos import demo_strips, demos_for
from program.retrieval.index import KnowledgeBase

DISPUTE = dspy.Example(
    question="How long do I have to respond to a dispute?",
    context=["[1] A dispute (also called a chargeback) happens when a cardholder asks their bank to reverse a payment.",
             "[2] You have 7 calendar days from the day the dispute is opened to submit evidence; after that, the dispute is automatically lost."],
    answer="You have 7 calendar days from the day the dispute is opened to submit evidence [2].")
HELP_CENTRE = {"disputes.md": "# Disputes\n\nA dispute (also called a chargeback) happens when a cardholder asks their bank "
               "to reverse a payment. You have 7 calendar days from the day the dispute is opened to submit evidence; "
               "after that, the dispute is automatically lost. A decision usually takes 60–75 days.\n"}
HANDBOOK = {"security.md": "# Security incidents\n\nReport a security incident within one hour of discovering it. "
            "Email gsa-ir@gsa.gov and copy your supervisor.\n",
            "leave.md": "# Leave\n\nYou can carry over up to 240 hours of annual leave into the next leave year.\n"}


def _kb(tmp_path, name, files, embedder):
    folder = tmp_path / name
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text)
    return KnowledgeBase.build(folder, tmp_path / f"{name}-index", embedder)


def test_a_demo_is_kept_only_where_the_knowledge_base_holds_its_passages(tmp_path, embedder):
    # the bug: the help centre's dispute demo came back word for word as the handbook's answer
    # to "How quickly do I have to report a security incident?"
    assert demo_strips(DISPUTE)[1].startswith("You have 7 calendar days")
    assert demos_for(_kb(tmp_path, "help", HELP_CENTRE, embedder), [DISPUTE]) == [DISPUTE]
    assert demos_for(_kb(tmp_path, "handbook", HANDBOOK, embedder), [DISPUTE]) == []
    assert demos_for(None, [DISPUTE]) == [DISPUTE]


def test_load_compiled_gives_the_reader_only_its_knowledge_bases_demos(tmp_path, embedder, fake_lm):
    from program.app.compiled import save_compiled
    from program.stages.crag import CRAG

    program = CRAG(knowledge_base=None)
    program.generator.generate.demos = [DISPUTE]
    save_compiled(program, {"lm": "fake"}, tmp_path / "compiled")
    state = json.loads((tmp_path / "compiled" / "crag.json").read_text())
    assert len(state["generator.generate"]["demos"]) == 1
    help_centre = _kb(tmp_path, "help", HELP_CENTRE, embedder)
    handbook = _kb(tmp_path, "handbook", HANDBOOK, embedder)
    own = load_compiled(tmp_path / "compiled", knowledge_base=help_centre, web=None, embedder=embedder)
    assert [d["question"] for d in own.generator.generate.demos] == [DISPUTE.question]
    assert load_compiled(tmp_path / "compiled", knowledge_base=handbook, web=None, embedder=embedder).generator.generate.demos == []
