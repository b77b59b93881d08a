"""``python -m optimize.evaluate`` over the real modes (closed, rag, crag, self-crag) on the fake LM.

Four labeled adversarial-style rows, each with its own passages and web pages, so that crag
routes them to every action and the figures of the summary can be worked out by hand: accuracy,
groundedness, correction rate, the confusion matrix, abstention, the drafts, truthfulness, p90,
steps. crag scores its drafts with ``COVERAGE_ONLY`` (as tests/test_crag.py does): an answer is
accepted when the passages it cites hold every content word of the question, so that the
routing does not hang on the default weights (the fake LM's token probability is always 1).
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from optimize import eval_data, evaluate
from optimize.metrics import percentile
from optimize.report import read_results, summarize
from program.stages.baselines import ClosedBook, VanillaRAG
from program.stages.crag import CRAG
from program.stages.draft import ConfidenceModel
from program.types import Passage
from signatures import AnswerClosedBook, GenerateAnswer, RewriteQuery
from tests.conftest import FOUNDING, generate
from tests.fake_lm import parse_list

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."
PAGE = "Rockets are fun to watch on a clear night. " + FOUNDING
Q1, Q2, Q3, Q4 = ("Who founded Acme Rockets?", "Who founded Acme?", "Where is Acme based?",
                  "What is Acme's stock ticker?")
# confidence sigmoid(10 * question coverage - 9): 0.73 when the cited passages hold the whole
# question, 0.02 when they hold half of it ("based" is in no passage of q3)
COVERAGE_ONLY = ConfidenceModel(weights={"question_coverage": 10.0}, bias=-9.0)
ROWS = [  # expected actions: q3 is labeled correct but routes ambiguous (one confusion)
    {"id": "q1", "question": Q1, "expected_action": "correct", "answerable": True, "gold_answers": ["Jane Roe"]},
    {"id": "q2", "question": Q2, "expected_action": "incorrect", "answerable": True, "gold_answers": ["Jane Roe"]},
    {"id": "q3", "question": Q3, "expected_action": "correct", "answerable": True, "gold_answers": ["Ohio"]},
    {"id": "q4", "question": Q4, "expected_action": "incorrect", "answerable": False, "gold_answers": []},
]
KB = {Q1: [FOUNDING + " It builds small sounding rockets for university teams.", OFF_TOPIC],
      Q2: [OFF_TOPIC, "Bananas are yellow."],
      Q3: ["Acme Rockets builds small rockets in Ohio.", OFF_TOPIC],
      Q4: [OFF_TOPIC]}
WEB = {Q2: [("https://example.org/acme", PAGE)], Q3: [("https://example.org/acme", PAGE)]}


class QuestionKB:
    """Passages chosen by the question asked (none for a question it does not know)."""

    def search(self, query, k=3):
        return [Passage(id=f"{query[:8]}-{i}#0", text=t, score=0.5) for i, t in enumerate(KB.get(query, [])[:k])]


class QuestionWeb:
    """Pages chosen by the search query (RewriteQuery echoes the question); none for Q4."""

    name = "question-web"

    def search(self, query, k=3):
        from program.web.base import SearchHit

        return [SearchHit(url=u, title=u, snippet=t[:80], content=t) for u, t in WEB.get(query, [])[:k]]


def generate_with_invention(inputs):
    """The default generator, plus an unsupported sentence for Q2 (the strict retry drops it), and
    for Q3 the Ohio passage's answer (right, but it does not say "based": crag's draft is unsure)."""
    if inputs["question"] == Q3:
        for i, strip in enumerate(parse_list(inputs["context"]), 1):
            if "in Ohio" in strip:
                return {"answer": f"Acme Rockets builds rockets in Ohio [{i}]."}
    out = generate(inputs)
    if inputs["question"] == Q2 and "Jane Roe" in out["answer"]:
        out["answer"] += " It was founded on Mars [1]."
    return out


@pytest.fixture
def run_eval(fake_lm, monkeypatch, tmp_path):
    """Patch the factory, the LM and the set; returns ``run(*args) -> (code, out_dir)`` and call counts."""
    fake_lm.rules[RewriteQuery] = lambda i: {"query": i["question"]}
    fake_lm.rules[GenerateAnswer] = generate_with_invention
    calls: list[tuple[str, str]] = []

    def counting(program, mode):
        original = program.forward

        def forward(question):
            calls.append((mode, question))
            if (mode, question) == run.interrupt_at:
                raise KeyboardInterrupt
            return original(question)
        program.forward = forward
        return program

    def build_program(mode, *, compiled_dir=None, knowledge_base=None, decide_retrieval=False, web="snapshot"):
        if mode == "closed":
            return counting(ClosedBook(), mode)
        if mode == "rag":
            return counting(VanillaRAG(QuestionKB(), k=2), mode)
        return counting(CRAG(QuestionKB(), web=QuestionWeb(), k=2, self_check=mode == "self-crag",
                             decide_retrieval=decide_retrieval, confidence=COVERAGE_ONLY), mode)

    monkeypatch.setattr("program.app.factory.build_program", build_program)
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda model=None, *a, **k: fake_lm)
    monkeypatch.setattr("program.app.resources.knowledge_base", lambda *a, **k: None)
    monkeypatch.setattr(eval_data, "load_domain_rows", lambda name, kind, split: ROWS)

    def run(*args, out="run"):
        code = evaluate.main(["--set", "adversarial", "--compiled", "none", "--out", str(tmp_path / out), *args])
        return code, tmp_path / out

    run.calls, run.interrupt_at = calls, None
    return run


def _csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_all_modes_figures(run_eval, capsys):
    code, out = run_eval("--modes", "closed,rag,crag,self-crag")
    assert code == 0
    s = json.loads((out / "summary.json").read_text())
    assert {"set", "split", "model", "groundedness", "threads", "resume", "skipped", "n_questions", "csv",
            "steps_csv", "plot", "modes"} <= set(s)
    closed, rag, crag, self_crag = (s["modes"][m] for m in ("closed", "rag", "crag", "self-crag"))
    # accuracy: closed says "Jane Roe" to everything; rag reads q1's founder and q3's Ohio and says
    # "I don't know." to q2 (wrong) and to the unanswerable q4 (right); crag answers q1 and q2
    # (from the web) with Jane Roe, declines q3 (its Ohio answer is too unsure, see below) and
    # abstains on the unanswerable q4.
    assert (closed["accuracy"], rag["accuracy"], crag["accuracy"], self_crag["accuracy"]) == (50.0, 75.0, 75.0, 75.0)
    # routing: q1's draft cites a passage holding the whole question (correct); q2's and q4's
    # drafts abstain (incorrect); q3's draft stands in its passage but leaves "based" out (ambiguous)
    assert crag["actions"] == {"correct": 1, "ambiguous": 1, "incorrect": 2}
    assert crag["correction_rate"] == 75.0 and rag["correction_rate"] is None
    assert crag["action_accuracy"] == 75.0
    assert crag["confusion"] == {"correct": {"correct": 1, "ambiguous": 1, "incorrect": 0},
                                 "ambiguous": {"correct": 0, "ambiguous": 0, "incorrect": 0},
                                 "incorrect": {"correct": 0, "ambiguous": 0, "incorrect": 2}}
    assert rag["confusion"] is None
    # q3 declined, q4 nothing found
    assert crag["outcomes"] == {"draft": 1, "corrected": 1, "declined": 2} and crag["fallback_rate"] == 50.0
    # abstention: crag's fallback on the answerable q3 and the unanswerable q4; rag's "I don't know." on q2 and q4
    assert (crag["abstention_answerable"], crag["abstention_unanswerable"]) == (33.3, 100.0)
    assert (rag["abstention_answerable"], rag["abstention_unanswerable"]) == (33.3, 100.0)
    # groundedness: crag q2 carries an invented claim (2 of 3 claims fully supported), checked post hoc;
    # self-crag's retry dropped it; rag's q1 and q3 answers hold; closed has no strips.
    assert (crag["groundedness"], crag["claims_checked"], crag["grounded_by"]) == (66.7, 3, "post-hoc")
    assert crag["groundedness_partial"] == 0.0
    assert (self_crag["groundedness"], self_crag["claims_checked"],
            self_crag["grounded_by"]) == (100.0, 2, "self-check")
    assert (rag["groundedness"], rag["claims_checked"]) == (100.0, 2)
    assert closed["groundedness"] is None and closed["grounded_by"] is None
    assert crag["check_lm_calls"] == 2  # q2: ExtractClaims + CheckClaimSupport for the invented claim
    assert self_crag["check_lm_calls"] is None
    # citations (ALCE): every stated answer cites; crag's q2 invented sentence cites nothing
    assert (crag["cited_share"], crag["citation_recall"], crag["citation_precision"]) == (100.0, 75.0, 100.0)
    assert (self_crag["cited_share"], self_crag["citation_recall"], self_crag["citation_precision"]) == \
        (100.0, 100.0, 100.0)
    assert closed["cited_share"] is None and closed["citation_recall"] is None
    # selective answering: right +1, "I don't know" 0, wrong -1. closed: 2 right, 2 wrong; rag and
    # crag: 3 right and one "I don't know" on an answerable question (rag's q2, crag's q3).
    assert (closed["truthfulness"], rag["truthfulness"], crag["truthfulness"], self_crag["truthfulness"]) == \
        (0.0, 75.0, 75.0, 75.0)
    assert (crag["answerable_right"], crag["unanswerable_declined"]) == (2, 1)
    # rag's confidence ranks its right q1, q3 (> 0) and q4 (0, an abstention) above its wrong q2 (0):
    # 2.5 of 3 pairs; answering only its most confident 80 % (q1, q3, then q2 first of the ties) leaves 2 of 3 right
    assert rag["confidence_auroc"] == 0.8333
    assert rag["risk_coverage"] == {"100": 75.0, "90": 75.0, "80": 66.7, "70": 66.7}
    # every answer crag's confidence speaks for was right (q3's declined Ohio answer too): nothing to rank
    assert crag["confidence_auroc"] is None and closed["confidence_auroc"] is None
    assert crag["risk_coverage"] == {"100": 100.0, "90": 100.0, "80": 100.0, "70": 100.0}
    # the drafts are rag's answers: the same three right, q2's "I don't know." the fourth
    assert crag["draft"] == self_crag["draft"] == {"n": 4, "accuracy": 75.0, "truthfulness": 75.0,
                                                   "answerable_right": 2, "unanswerable_declined": 1}
    assert rag["draft"] is None and closed["draft"] is None

    rows = _csv(out / "results.csv")
    by = {(r["mode"], r["id"]): r for r in rows}
    assert list(rows[0]) == evaluate.CSV_COLUMNS
    assert by[("crag", "q2")]["groundedness"] == "0.5" and by[("crag", "q2")]["check_lm_calls"] == "2"
    assert by[("crag", "q4")]["abstained"] == "True" and by[("crag", "q4")]["claims"] == ""
    assert by[("self-crag", "q2")]["answer"] == "Acme Rockets was founded by Jane Roe [1]."
    number, source, text = json.loads(by[("self-crag", "q2")]["citations"])[0]
    assert number == 1 and "Jane Roe" in text  # the strip a reader checks the citation against
    assert by[("crag", "q2")]["unsupported_sentences"] == "1" and by[("crag", "q4")]["citations"] == ""
    # the draft columns: q2's draft abstained (wrong) and the corrected answer was right; q3's right
    # draft was declined, its confidence that of the answer declined
    q2, q3 = by[("crag", "q2")], by[("crag", "q3")]
    assert (q2["draft"], q2["draft_correct"], q2["candidate_correct"], q2["correct"]) == \
        ("I don't know.", "False", "True", "True")
    assert (q3["draft"], q3["draft_correct"], q3["candidate_correct"], q3["correct"]) == \
        ("Acme Rockets builds rockets in Ohio [1].", "True", "True", "False")
    assert (q3["action"], q3["fallback"], q3["confidence"]) == ("ambiguous", "True", "0.018")
    checks = json.loads(q3["draft_checks"])
    assert (checks["support"], checks["premise"], checks["question_coverage"],
            checks["abstained"]) == (1.0, 1.0, 0.5, False)
    assert by[("rag", "q3")]["draft"] == "" and by[("rag", "q3")]["answer"] == q3["draft"]
    # the post-hoc check is outside the mode's cost: crag's q2 costs what self-crag's does before its check
    crag_calls = [int(by[("crag", q)]["lm_calls"]) for q in ("q1", "q2", "q3", "q4")]
    # q1 the draft; q2, q3 draft, rewrite, a strip grade per page sentence (2), the answer again; q4 draft, rewrite
    assert crag_calls == [1, 5, 5, 2]
    assert crag["median_lm_calls"] == float(np.median(crag_calls))
    assert crag["p90_lm_calls"] == pytest.approx(float(np.percentile(crag_calls, 90)))
    assert closed["median_lm_calls"] == 1 and closed["p90_lm_calls"] == 1

    steps = _csv(out / "steps.csv")
    assert list(steps[0]) == evaluate.STEP_COLUMNS
    for (mode, qid), r in by.items():  # the step rows add up to the question's cost
        mine = [x for x in steps if x["mode"] == mode and x["id"] == qid]
        assert sum(int(x["lm_calls"]) for x in mine) == int(r["lm_calls"])
        assert sum(int(x["prompt_tokens"]) for x in mine) == int(r["prompt_tokens"])
    assert [x["step"] for x in steps if x["mode"] == "crag" and x["id"] == "q1"] == \
        ["retrieve", "evaluate", "draft", "decide", "cite"]
    assert [x["step"] for x in steps if x["mode"] == "self-crag" and x["id"] == "q2"] == \
        ["retrieve", "evaluate", "draft", "decide", "rewrite", "re-retrieve", "web-search", "evaluate-corrected",
         "refine-corrected", "generate", "self-check", "generate-strict", "self-check-retry", "cite"]
    # passages are scored without the LM: evaluating costs nothing; the draft is one call a question
    ev, draft = crag["steps"]["evaluate"], crag["steps"]["draft"]
    assert (ev["ran"], ev["mean_lm_calls"]) == (4, 0.0) and (draft["ran"], draft["mean_lm_calls"]) == (4, 1.0)
    assert crag["steps"]["decide"]["mean_lm_calls"] == 0.0
    assert crag["steps"]["web-search"]["ran"] == 3
    # q4's correction found nothing, so nothing was evaluated or written again
    assert crag["steps"]["evaluate-corrected"]["ran"] == 2 and crag["steps"]["generate"]["ran"] == 2
    assert sum(c["mean_lm_calls"] for c in crag["steps"].values()) == pytest.approx(sum(crag_calls) / 4)

    png = out / "accuracy_vs_cost.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and s["plot"] == str(png)
    assert (out / "risk_coverage.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    printed = capsys.readouterr().out
    assert "| crag | 4 | 0 | 75 % | 1/1/2 | 75 % |" in printed
    assert "evaluator confusion, crag" in printed and "| correct | 1 | 1 | 0 |" in printed
    assert "| self-crag | generate-strict |" in printed
    assert "| rag | 75 % | 75 | 2 | 1 | 0.8333 | 75 % | 75 % | 66.7 % | 66.7 % |" in printed
    assert "| crag's draft (rag's call) | 75 % | 75 | 2 | 1 | - |" in printed

GREETING = "Hi there!"
CHAT_ROW = {"id": "q5", "question": GREETING, "expected_action": "incorrect", "answerable": True,
            "gold_answers": ["hello"], "needs_retrieval": False}


def test_decide_retrieval_skips_chit_chat_and_reports_it(run_eval, fake_lm, monkeypatch, capsys):
    monkeypatch.setattr(eval_data, "load_domain_rows", lambda name, kind, split: ROWS + [CHAT_ROW])
    fake_lm.rules[AnswerClosedBook] = lambda i: {"answer": "Hello! How can I help?" if i["question"] == GREETING
                                                 else "Acme Rockets was founded by Jane Roe."}
    code, plain = run_eval("--modes", "closed,crag", out="plain")
    code2, out = run_eval("--modes", "closed,crag", "--decide-retrieval", out="decide")
    assert code == code2 == 0
    s0 = json.loads((plain / "summary.json").read_text())
    s = json.loads((out / "summary.json").read_text())
    assert s0["decide_retrieval"] is False and s["decide_retrieval"] is True
    closed, crag, crag0 = s["modes"]["closed"], s["modes"]["crag"], s0["modes"]["crag"]

    # without the decider crag searches for the greeting, finds nothing and abstains (wrong);
    # with it the greeting is answered closed-book in 2 calls; every other question costs one call more
    assert crag0["accuracy"] == 60.0 and crag["accuracy"] == 80.0
    assert crag0["no_retrieval_questions"] == {"n": 1, "accuracy": 0.0, "median_lm_calls": 1}  # rewrite; no hits
    assert crag["no_retrieval_questions"] == {"n": 1, "accuracy": 100.0, "median_lm_calls": 2}
    assert closed["no_retrieval_questions"] == {"n": 1, "accuracy": 100.0, "median_lm_calls": 1}
    assert (crag["skip_rate"], crag["decision_accuracy"], crag["skipped_needing_retrieval"]) == (20.0, 100.0, 0)
    assert (crag0["skip_rate"], crag0["decision_accuracy"], crag0["skipped_needing_retrieval"]) == (None, None, None)
    assert closed["skip_rate"] is None
    # the skipped question has no action: the routing figures cover the four graded ones, as before
    assert crag["actions"] == {"correct": 1, "ambiguous": 1, "incorrect": 2} and crag["action_accuracy"] == 75.0
    assert crag0["actions"] == {"correct": 1, "ambiguous": 1, "incorrect": 3}

    by = {(r["mode"], r["id"]): r for r in _csv(out / "results.csv")}
    by0 = {(r["mode"], r["id"]): r for r in _csv(plain / "results.csv")}
    assert [by[("crag", q)]["retrieval_skipped"] for q in ("q1", "q2", "q3", "q4", "q5")] == \
        ["False", "False", "False", "False", "True"]
    assert by[("closed", "q5")]["retrieval_skipped"] == "" and by0[("crag", "q5")]["retrieval_skipped"] == ""
    assert by[("crag", "q5")]["needs_retrieval"] == "False" and by[("crag", "q1")]["needs_retrieval"] == "True"
    chat = by[("crag", "q5")]
    assert (chat["answer"], chat["action"], chat["correct"], chat["lm_calls"]) == \
        ("Hello! How can I help?", "", "True", "2")
    assert chat["claims"] == "" and chat["grounded_by"] == "" and chat["check_lm_calls"] == ""  # nothing to check
    for q in ("q1", "q2", "q3", "q4"):
        assert int(by[("crag", q)]["lm_calls"]) == int(by0[("crag", q)]["lm_calls"]) + 1
    assert [x["step"] for x in _csv(out / "steps.csv") if x["mode"] == "crag" and x["id"] == "q5"] == \
        ["decide-retrieval", "answer-closed-book"]
    assert crag["steps"]["decide-retrieval"]["ran"] == 5 and crag["steps"]["answer-closed-book"]["ran"] == 1
    printed = capsys.readouterr().out
    assert "retrieval skipped" in printed and "| 20 % | 100 % (2) |" in printed


def test_groundedness_off_and_threads(run_eval):
    code, one = run_eval("--modes", "rag,crag", "--groundedness", "off", out="one")
    code2, two = run_eval("--modes", "rag,crag", "--threads", "3", out="two")
    assert code == code2 == 0
    s1 = json.loads((one / "summary.json").read_text())
    s2 = json.loads((two / "summary.json").read_text())
    assert s1["modes"]["crag"]["groundedness"] is None and s1["modes"]["crag"]["check_lm_calls"] is None
    assert s2["threads"] == 3 and s2["modes"]["crag"]["groundedness"] == 66.7  # as one at a time (q2's invented claim)
    # each question's cost is its own even when questions run at once (one LM copy per question)
    key = lambda r: (r["mode"], r["id"])  # noqa: E731
    a = {key(r): (r["lm_calls"], r["prompt_tokens"], r["action"], r["answer"]) for r in _csv(one / "results.csv")}
    b = {key(r): (r["lm_calls"], r["prompt_tokens"], r["action"], r["answer"]) for r in _csv(two / "results.csv")}
    assert a == b and len(a) == 8


def test_resume_skips_done_questions(run_eval):
    code, out = run_eval("--modes", "closed,crag", "--limit", "2")
    assert code == 0 and len(run_eval.calls) == 4
    done = {q for _, q in run_eval.calls}
    run_eval.calls.clear()
    code, out = run_eval("--modes", "closed,crag", "--resume")
    assert code == 0
    rest = {Q1, Q2, Q3, Q4} - done
    assert len(rest) == 2 and sorted(run_eval.calls) == sorted((m, q) for m in ("closed", "crag") for q in rest)
    s = json.loads((out / "summary.json").read_text())
    assert s["skipped"] == 4 and s["modes"]["crag"]["n"] == 4 and s["modes"]["crag"]["accuracy"] == 75.0
    assert len(_csv(out / "results.csv")) == 8
    assert len({(r["mode"], r["id"], r["step_index"]) for r in _csv(out / "steps.csv")}) == len(_csv(out / "steps.csv"))
    run_eval.calls.clear()
    code, _ = run_eval("--modes", "closed,crag", "--resume")
    assert code == 0 and run_eval.calls == []


def test_interrupt_writes_the_summary_and_resume_finishes(run_eval):
    run_eval.interrupt_at = ("crag", Q3)
    code, out = run_eval("--modes", "closed,crag")
    assert code == 130
    s = json.loads((out / "summary.json").read_text())
    assert s["modes"]["closed"]["n"] == 4 and s["modes"]["crag"]["n"] == 2
    run_eval.interrupt_at = None
    run_eval.calls.clear()
    code, out = run_eval("--modes", "closed,crag", "--resume")
    assert code == 0 and run_eval.calls == [("crag", Q3), ("crag", Q4)]
    assert json.loads((out / "summary.json").read_text())["modes"]["crag"]["accuracy"] == 75.0


def test_embedded_model_runs_one_question_at_a_time(run_eval, fake_lm, capsys):
    fake_lm.model = "local/embedded-0.5b"
    code, out = run_eval("--modes", "closed", "--threads", "4")
    assert code == 0 and json.loads((out / "summary.json").read_text())["threads"] == 1
    assert "--threads set to 1" in capsys.readouterr().err


def test_resume_upgrades_an_older_results_csv(run_eval, tmp_path):
    out = tmp_path / "old"
    out.mkdir()
    (out / "results.csv").write_text(
        "id,question,relation,mode,answer,correct,action,expected_action,confidence,fallback,"
        "escalated,lm_calls,prompt_tokens,completion_tokens,seconds,error,gold\n"
        f"q1,{Q1},,closed,Jane Roe,True,,correct,,False,False,1,100,10,2.0,,[]\n")
    code, _ = run_eval("--modes", "closed", "--resume", out="old")
    assert code == 0 and ("closed", Q1) not in run_eval.calls and len(run_eval.calls) == 3
    rows = _csv(out / "results.csv")
    assert list(rows[0]) == evaluate.CSV_COLUMNS and [r["id"] for r in rows] == ["q1", "q2", "q3", "q4"]
    assert rows[0]["prompt_tokens"] == "100" and rows[0]["claims"] == ""


def test_resume_needs_a_folder():
    with pytest.raises(SystemExit) as exc:
        evaluate.parse_args(["--resume"])
    assert exc.value.code == 2


def test_out_folder_names():
    import datetime as dt

    now = dt.datetime(2026, 3, 4, 5, 6, 7)
    assert str(evaluate.out_folder(evaluate.parse_args(["--set", "popqa"]), now)) == "results/2026-03-04-050607-popqa"
    assert str(evaluate.out_folder(evaluate.parse_args(["--name", "base"]), now)) == "results/2026-03-04-base"
    assert str(evaluate.out_folder(evaluate.parse_args(["--out", "x/y"]), now)) == "x/y"


def test_percentile():
    xs = list(range(1, 11))
    assert percentile(xs, 90) == pytest.approx(9.1) == pytest.approx(float(np.percentile(xs, 90)))
    assert percentile([None, 4.0], 90) == 4.0 and percentile([], 90) is None
    with pytest.raises(ValueError):
        percentile(xs, 101)


def test_summary_of_an_older_csv(tmp_path):
    """A results.csv from before the groundedness columns still summarises (PopQA: all answerable)."""
    path = tmp_path / "results.csv"
    path.write_text("id,question,relation,mode,answer,correct,action,expected_action,confidence,fallback,"
                    "escalated,lm_calls,prompt_tokens,completion_tokens,seconds,error,gold\n"
                    "a,q,r,crag,x,True,correct,,1.0,False,False,4,100,10,2.0,,[]\n"
                    "b,q,r,crag,y,False,incorrect,,0.0,True,False,6,200,20,4.0,,[]\n")
    s = summarize(read_results(path))
    assert s["accuracy"] == 50.0 and s["correction_rate"] == 50.0
    assert s["abstention_answerable"] == 50.0 and s["abstention_unanswerable"] is None
    assert s["median_tokens"] == 165 and s["p90_seconds"] == pytest.approx(3.8)


def test_post_hoc_checker_uses_the_compiled_prompts(tmp_path):
    from optimize.record import claim_checker
    from program.stages.selfcheck import ClaimChecker

    state = ClaimChecker().support.dump_state()
    state["signature"]["instructions"] = "Compiled support instructions."
    (tmp_path / "crag.json").write_text(json.dumps({"checker.support": state}))
    checker = claim_checker(object(), tmp_path)
    assert checker.support.signature.instructions == "Compiled support instructions."
    own = ClaimChecker()
    assert claim_checker(type("P", (), {"checker": own})(), tmp_path) is own


def test_a_mode_that_cannot_be_built(run_eval, monkeypatch):
    def broken(mode, **kwargs):
        raise RuntimeError("no index")

    monkeypatch.setattr("program.app.factory.build_program", broken)
    code, out = run_eval("--modes", "rag")
    assert code == 1
    s = json.loads((out / "summary.json").read_text())
    assert s["modes"] == {"rag": {"build_error": "RuntimeError: no index"}} and s["plot"] is None
