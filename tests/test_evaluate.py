"""Tests for the PopQA sampler, the PopQA metric and ``python -m optimize.evaluate``.

The evaluate tests replace ``program.app.factory`` and ``program.lm.configure`` with fake modules in
``sys.modules``: no model, no retrieval, fixed ``CRAGResult`` objects per question.
"""

from __future__ import annotations

import csv
import json
import types

import pytest

from eval_sets.popqa import load_questions
from optimize import eval_data, evaluate
from optimize.metrics import answer_correct, median
from program.types import Action, CRAGResult, Ending, Outcome, StepCost, Trace

# --- sampler -------------------------------------------------------------------------------


#: the first 16 ids the sampler deals from the PopQA dev split with seed 0 (eval_sets/popqa/split.json)
DEV_16_SEED_0 = ["popqa-1395", "popqa-0720", "popqa-0246", "popqa-0791", "popqa-0960", "popqa-0840",
                 "popqa-0905", "popqa-0316", "popqa-0039", "popqa-0639", "popqa-1355", "popqa-0852",
                 "popqa-0409", "popqa-0986", "popqa-1393", "popqa-0733"]


def test_sample_spreads_over_relations():
    qs = load_questions(limit=16, seed=0)
    assert len(qs) == 16
    assert len({q["relation"] for q in qs}) >= 8
    assert set(qs[0]) == {"id", "question", "possible_answers", "relation", "subject"}


def test_sample_is_deterministic_and_prefix_stable():
    a = [q["id"] for q in load_questions(limit=16, seed=0)]
    assert a == DEV_16_SEED_0  # the dev split's ids, dealt round-robin over the relations
    assert a == [q["id"] for q in load_questions(limit=16, seed=0)]
    assert [q["id"] for q in load_questions(limit=40, seed=0)][:16] == a
    assert len(set(a)) == 16


def test_sample_differs_by_seed():
    a = {q["id"] for q in load_questions(limit=16, seed=0)}
    b = {q["id"] for q in load_questions(limit=16, seed=1)}
    assert a != b


def test_no_limit_returns_the_whole_split_once():
    dev, train, every = load_questions(), load_questions(split="train"), load_questions(split=None)
    assert len(every) == 1099 and len({q["id"] for q in every}) == 1099
    assert len(dev) == len({q["id"] for q in dev}) == 302
    assert len(train) == 797 and not {q["id"] for q in dev} & {q["id"] for q in train}
    with pytest.raises(ValueError):
        load_questions(limit=0)
    with pytest.raises(ValueError, match="no 'test' split"):
        load_questions(split="test")


# --- metric --------------------------------------------------------------------------------


def test_answer_correct():
    assert answer_correct("He is a Journalist.", ["journalist"])
    assert answer_correct("journalist", ["JOURNO", "Journalist"])
    assert not answer_correct("London", ["Paris"])
    assert not answer_correct("", ["Paris"])
    assert not answer_correct("Paris", [])
    assert not answer_correct("Paris", ["  "])


def test_median():
    assert median([3, 1, 2]) == 2.0
    assert median([4, 1, 2, 3]) == 2.5
    assert median([None, 5, float("nan")]) == 5.0
    assert median([]) is None


# --- evaluate main -------------------------------------------------------------------------


def _result(question: str, answer: str, action: Action | None, fallback: bool = False,
            calls: int = 1, pt: int = 100, ct: int = 10, confidence: float = 0.5, draft: str = "",
            declined: str = "") -> CRAGResult:
    trace = Trace(steps=[StepCost("generate", lm_calls=calls, prompt_tokens=pt, completion_tokens=ct, seconds=0.1)])
    outcome = Outcome(Ending.DECLINED, "below accept", declined) if fallback else Outcome()
    return CRAGResult(question=question, answer=answer, action=action, confidence=confidence, outcome=outcome,
                      trace=trace, draft=draft, draft_checks={"support": 1.0} if draft else {})


@pytest.fixture
def fake_program(monkeypatch):
    """Install fake ``program.app.factory`` / ``program.lm.configure``; returns the list of built modes."""
    qs = load_questions(limit=4, seed=0)
    gold = {q["question"]: q["possible_answers"][0] for q in qs}
    q0, q1, q2, q3 = (q["question"] for q in qs)
    built: list[tuple[str, str | None]] = []

    class FakeProgram:
        def __init__(self, mode):
            self.mode = mode

        def __call__(self, question):
            if question == q3:
                raise RuntimeError("boom")
            crag = self.mode == "crag"
            # crag's answers carry the reader's draft and a confidence (closed's: neither)
            if question == q0:  # right, upper-cased gold inside a sentence
                answer = f"It is {gold[q0].upper()}."
                return _result(question, answer, Action.CORRECT if crag else None, calls=3,
                               confidence=0.9 if crag else 0.0, draft=answer if crag else "")
            if question == q1:  # wrong
                return _result(question, "Nobody knows zzz", Action.INCORRECT if crag else None, calls=5, pt=300,
                               confidence=0.6 if crag else 0.0, draft="Nobody knows zzz" if crag else "")
            # q2: fallback; crag declined a right answer (below its operating point)
            right = f"It is {gold[q2]}."
            return _result(question, "I don't have reliable information on this.",
                           Action.AMBIGUOUS if crag else None, fallback=crag, calls=7, pt=500, ct=20,
                           confidence=0.3 if crag else 0.0, draft=right if crag else "", declined=right if crag else "")

    def build_program(mode, *, compiled_dir="compiled", knowledge_base=None, decide_retrieval=False, web="snapshot",
                      **settings):
        built.append((mode, compiled_dir, *sorted(settings.items())) if settings else (mode, compiled_dir))
        return FakeProgram(mode)

    configured: list = []
    factory = types.ModuleType("program.app.factory")
    factory.build_program = build_program
    lm = types.ModuleType("program.lm.configure")
    lm.configure_lm = lambda model=None, *a, **k: configured.append(model) or types.SimpleNamespace(model=model)
    monkeypatch.setitem(__import__("sys").modules, "program.app.factory", factory)
    monkeypatch.setitem(__import__("sys").modules, "program.lm.configure", lm)
    return types.SimpleNamespace(qs=qs, built=built, configured=configured)


def test_evaluate_main_end_to_end(fake_program, tmp_path, capsys):
    out = tmp_path / "run"
    code = evaluate.main(["--set", "popqa", "--limit", "4", "--modes", "closed,crag",
                          "--model", "embedded-0.5b", "--out", str(out), "--compiled", "none"])
    assert code == 0
    assert fake_program.configured == ["embedded-0.5b"]
    assert fake_program.built == [("closed", None), ("crag", None)]

    with open(out / "results.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 8
    assert list(rows[0]) == evaluate.CSV_COLUMNS
    ids = [q["id"] for q in fake_program.qs]
    assert ids == DEV_16_SEED_0[:4]  # PopQA is asked from its dev split by default
    assert [r["id"] for r in rows] == ids + ids
    assert [r["mode"] for r in rows] == ["closed"] * 4 + ["crag"] * 4
    crag = rows[4:]
    assert [r["correct"] for r in crag] == ["True", "False", "False", "False"]
    assert [r["action"] for r in crag] == ["correct", "incorrect", "ambiguous", ""]
    assert [r["fallback"] for r in crag] == ["False", "False", "True", "False"]
    assert [r["lm_calls"] for r in crag] == ["3", "5", "7", ""]
    assert [r["prompt_tokens"] for r in crag] == ["100", "300", "500", ""]
    assert [r["error"] for r in crag] == ["", "", "", "RuntimeError: boom"]
    assert [r["action"] for r in rows[:4]] == ["", "", "", ""]
    # the draft columns: crag's drafts as written (q2's was right, and declined), none for closed
    assert [r["draft_correct"] for r in crag] == ["True", "False", "True", ""]
    assert [r["candidate_correct"] for r in crag] == ["True", "False", "True", ""]  # q2: the declined answer
    assert json.loads(crag[0]["draft_checks"]) == {"support": 1.0} and crag[3]["draft_checks"] == ""
    assert [(r["draft"], r["draft_correct"], r["candidate_correct"]) for r in rows[:4]] == \
        [("", "", "True"), ("", "", "False"), ("", "", "False"), ("", "", "")]
    assert rows[0]["relation"] == fake_program.qs[0]["relation"]
    assert json.loads(rows[0]["gold"]) == fake_program.qs[0]["possible_answers"]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_questions"] == 4
    c, k = summary["modes"]["closed"], summary["modes"]["crag"]
    assert c["n"] == 4 and c["errors"] == 1 and c["accuracy"] == 25.0 and c["actions"] is None
    assert k["accuracy"] == 25.0
    assert k["actions"] == {"correct": 1, "ambiguous": 1, "incorrect": 1}
    assert k["fallback_rate"] == pytest.approx(33.3)
    assert k["median_lm_calls"] == 5.0
    assert k["median_tokens"] == 310.0  # 110, 310, 520
    assert c["fallback_rate"] == 0.0
    # selective answering: right +1, "I don't know" (q2's fallback) 0, wrong -1 (q1, and the error q3)
    assert (k["truthfulness"], k["answerable_right"], k["unanswerable_declined"]) == (-25.0, 1, 0)
    # the confidence ranks right q0 (0.9) above wrong q1 (0.6), and q1 above right q2 (0.3): 1 of 2 pairs
    assert k["confidence_auroc"] == 0.5
    assert k["risk_coverage"] == {"100": 66.7, "90": 66.7, "80": 50.0, "70": 50.0}
    # the drafts as answers: q0 and q2 right, q1 wrong
    assert k["draft"] == {"n": 3, "accuracy": 66.7, "truthfulness": 33.3, "answerable_right": 2,
                          "unanswerable_declined": 0}
    # closed: q0 right, q1 wrong, q2 the fallback's text (0), the error q3 wrong; no confidence to rank
    assert (c["truthfulness"], c["confidence_auroc"], c["risk_coverage"], c["draft"]) == (-25.0, None, None, None)

    printed = capsys.readouterr().out
    assert "| crag | 4 | 1 | 25 % | 1/1/1 |" in printed
    assert "| closed | 4 | 1 | 25 % | - |" in printed
    # accuracy per relation: the four questions come from four relations, one right in each mode
    by = k["accuracy_by_relation"]
    assert sorted(by.values()) == [0.0, 0.0, 0.0, 100.0] and by == c["accuracy_by_relation"]
    assert "accuracy by relation / category:" in printed


def test_evaluate_passes_the_operating_point_to_every_mode(fake_program, tmp_path, capsys):
    """``--accept`` sets crag's operating point (0 accepts every draft: the confidence model's rows);
    a value outside [0, 1] is refused before anything is built."""
    code = evaluate.main(["--set", "popqa", "--limit", "4", "--modes", "closed,crag", "--accept", "0",
                          "--out", str(tmp_path / "rows"), "--compiled", "none"])
    assert code == 0
    assert fake_program.built == [("closed", None, ("accept", 0.0)), ("crag", None, ("accept", 0.0))]
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--set", "popqa", "--accept", "1.5", "--out", str(tmp_path / "bad")])
    assert exc.value.code == 2 and "--accept must be in [0, 1], got 1.5" in capsys.readouterr().err
    assert len(fake_program.built) == 2


def test_evaluate_passes_the_verify_band_and_refuses_one_outside_0_1(fake_program, tmp_path, capsys):
    """``--verify-band 0`` turns crag's claim check off (the confidence model's rows are drafts
    as written); the run's summary records it."""
    code = evaluate.main(["--set", "popqa", "--limit", "4", "--modes", "crag", "--accept", "0", "--verify-band", "0",
                          "--out", str(tmp_path / "rows"), "--compiled", "none"])
    assert code == 0 and fake_program.built == [("crag", None, ("accept", 0.0), ("verify_band", 0.0))]
    assert json.loads((tmp_path / "rows" / "summary.json").read_text())["verify_band"] == 0.0
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--set", "popqa", "--verify-band", "-0.1", "--out", str(tmp_path / "bad")])
    assert exc.value.code == 2 and "--verify-band must be in [0, 1], got -0.1" in capsys.readouterr().err


def test_evaluate_popqa_split(fake_program, tmp_path, capsys):
    # --split applies to PopQA: dev by default (recorded in summary.json), train for analyses
    code = evaluate.main(["--set", "popqa", "--split", "train", "--limit", "4", "--modes", "closed",
                          "--out", str(tmp_path / "train"), "--compiled", "none"])
    assert code == 0
    with open(tmp_path / "train" / "results.csv", newline="") as fh:
        ids = [r["id"] for r in csv.DictReader(fh)]
    assert ids == [q["id"] for q in load_questions(limit=4, seed=0, split="train")]
    assert not set(ids) & set(DEV_16_SEED_0)
    assert json.loads((tmp_path / "train" / "summary.json").read_text())["split"] == "train"
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--set", "popqa", "--split", "test", "--out", str(tmp_path / "test")])
    assert exc.value.code == 2
    assert "PopQA has only the splits train and dev" in capsys.readouterr().err


def test_load_set_popqa_samples_only_dev():
    from eval_sets.popqa import load_split

    split = load_split()
    rows = eval_data.load_set("popqa", limit=50, seed=0)
    assert len(rows) == 50 and {r["id"] for r in rows} <= split["dev"]
    assert {r["id"] for r in eval_data.load_set("popqa", None, 0, "train")} == split["train"]


def test_popqa_chooses_on_the_100_every_variant_was_chosen_on_and_confirms_on_the_rest():
    choose = eval_data.load_set("popqa", None, 0, "dev", "choose")
    confirm = eval_data.load_set("popqa", None, 0, "dev", "confirm")
    assert [r["id"] for r in choose] == [r["id"] for r in eval_data.load_set("popqa", 100, 0)]
    assert len(confirm) == 202 and not {r["id"] for r in choose} & {r["id"] for r in confirm}
    first = eval_data.load_set("popqa", 150, 0, "dev", "confirm")
    assert [r["id"] for r in first] == [r["id"] for r in confirm[:150]]
    assert len({r["relation"] for r in first}) >= 8  # the dealt order spreads it over relations


def test_a_domain_chooses_on_a_stratified_half_of_dev_and_confirms_on_the_other():
    dev = eval_data.load_set("kubernetes", None, 0, "dev")
    choose = eval_data.load_set("kubernetes", None, 0, "dev", "choose")
    confirm = eval_data.load_set("kubernetes", None, 0, "dev", "confirm")
    assert len(choose) == len(dev) // 2 and len(choose) + len(confirm) == len(dev)
    assert not {r["id"] for r in choose} & {r["id"] for r in confirm}
    assert {r["relation"] for r in choose} == {r["relation"] for r in dev}
    with pytest.raises(ValueError, match="unknown sample part 'tune': choose or confirm"):
        eval_data.sample_part("kubernetes", dev, "tune", 0)


def test_the_sample_part_is_a_flag_and_only_choose_or_confirm(capsys):
    assert evaluate.parse_args(["--sample", "confirm", "--limit", "150"]).sample == "confirm"
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--sample", "test"])
    assert "invalid choice: 'test'" in capsys.readouterr().err


def test_evaluate_rejects_an_unknown_set(fake_program, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        evaluate.main(["--set", "nosuch", "--out", str(tmp_path)])
    assert exc.value.code == 2
    assert "unknown --set 'nosuch' (popqa, adversarial, handbook, kubernetes, owasp)" in capsys.readouterr().err


def test_a_domain_set_runs_without_the_web_by_default():
    assert evaluate.parse_args(["--set", "kubernetes"]).web == "none"
    assert evaluate.parse_args(["--set", "adversarial"]).web == "none"
    assert evaluate.parse_args(["--set", "popqa"]).web == "snapshot"
    assert evaluate.parse_args(["--set", "handbook", "--web", "snapshot"]).web == "snapshot"


def test_evaluate_adversarial_with_loader(fake_program, tmp_path, monkeypatch):
    q0, q1 = fake_program.qs[0]["question"], fake_program.qs[2]["question"]
    rows = [
        {"question": q0, "gold_answers": fake_program.qs[0]["possible_answers"],
         "expected_action": "correct", "answerable": True},
        {"question": q1, "gold_answers": [], "expected_action": "incorrect", "answerable": False},
    ]
    seen = []
    monkeypatch.setattr(eval_data, "load_domain_rows",
                        lambda name, kind, split: seen.append((name, kind, split)) or rows)
    code = evaluate.main(["--set", "adversarial", "--split", "test", "--modes", "crag", "--out", str(tmp_path)])
    assert code == 0 and seen == [("adversarial", "queries", "test")]
    s = json.loads((tmp_path / "summary.json").read_text())["modes"]["crag"]
    assert s["accuracy"] == 100.0  # gold match, then the fallback on the unanswerable one
    assert s["action_accuracy"] == 50.0  # correct == correct, ambiguous != incorrect


def test_an_i_dont_know_answer_is_an_abstention():
    # the failing input: crag answered an unanswerable adversarial question "I don't know"
    # without the fallback flag, and it was scored wrong
    from optimize.eval_data import abstained, is_correct

    row = {"answerable": False, "gold": ["don't know"]}
    assert abstained("I don't know", fallback=False) and is_correct(row, "I don't know", fallback=False)
    assert not is_correct(row, "No, there is no dispute fee.", fallback=False)
    assert not abstained("Acme Rockets was founded by Jane Roe [1].", fallback=False)


def test_questions_the_compiled_prompts_hold_as_demos_are_left_out_of_evaluation(tmp_path):
    """The bug: three PopQA dev questions were few-shot demos of the committed compile (an
    adversarial training row reused them), so their answers stood in the prompt."""
    from pathlib import Path

    from optimize.eval_data import demo_questions, held_out, load_set

    (tmp_path / "crag.json").write_text(json.dumps({
        "generator.generate": {"demos": [{"question": "Who is the father of  Hans Holtedahl?", "answer": "Olaf"}]},
        "evaluator.grade": {"demos": [{"augmented": True}]}, "metadata": {"dependency_versions": {}}}))
    assert demo_questions(tmp_path) == {"who is the father of hans holtedahl?"}
    assert demo_questions(None) == set() == demo_questions(tmp_path / "none")
    kept, out = held_out(load_set("popqa", None, 0, "dev"),
                         demo_questions(Path(__file__).resolve().parent.parent / "compiled"))
    assert sorted(r["id"] for r in out) == ["popqa-0002", "popqa-0189", "popqa-0409"] and len(kept) == 299


def test_retrieval_flag_searches_the_knowledge_base_in_that_mode():
    class Recording:
        manifest = {"files": {"a.md": "0" * 64}}

        def __init__(self):
            self.modes = []

        def search(self, query, k=3, mode="hybrid"):
            self.modes.append(mode)
            return [query] * k

        def search_batch(self, queries, k=3, mode="hybrid"):
            self.modes.append(mode)
            return [[q] for q in queries]

        def __len__(self):
            return 7

    kb = Recording()
    dense = evaluate.SearchMode(kb, "dense")
    assert dense.search("q", 2) == ["q", "q"] and dense.search_batch(["a", "b"]) == [["a"], ["b"]]
    assert kb.modes == ["dense", "dense"] and len(dense) == 7 and dense.manifest is kb.manifest
    assert evaluate.parse_args(["--retrieval", "dense"]).retrieval == "dense"
    with pytest.raises(SystemExit):
        evaluate.parse_args(["--retrieval", "fuzzy"])


def test_a_domains_follow_ups_are_graded_by_the_question_each_is_built_on():
    asked = eval_data.followup_rows("kubernetes", "test", "asked")
    standalone = eval_data.followup_rows("kubernetes", "test", "standalone")
    assert len(asked) == len(standalone) == 10 and [r["id"] for r in asked] == [r["id"] for r in standalone]
    source = {r["id"]: r for r in eval_data.load_set("kubernetes", None, 0, "test")}
    from eval_sets.followups import load_rows

    for row, fu, alone in zip(load_rows("kubernetes", "test"), asked, standalone):
        assert fu["question"] == row["followup"] and alone["question"] == row["standalone"]
        assert fu["gold"] == alone["gold"] == source[row["source_id"]]["gold"] and fu["answerable"]
        assert fu["history"][0] == ("user", row["history"][0]["content"]) and "history" not in alone


def test_follow_ups_of_a_set_without_them_are_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as caught:
        eval_data.followup_rows("popqa", "dev", "asked")
    assert caught.value.code == 2
    assert capsys.readouterr().err.startswith("error: --followups asked --set popqa --split dev: no such follow-ups")


def test_a_rewrite_is_scored_by_the_content_words_it_shares_with_the_hand_written_one():
    from optimize.predictor_metrics import standalone_figures, standalone_overlap

    example = types.SimpleNamespace(followup="What does the first one default to?",
                                    standalone_question="What is the default containerLogMaxSize?")
    right = types.SimpleNamespace(standalone_question="What is the default value of containerLogMaxSize?")
    unchanged = types.SimpleNamespace(standalone_question="What does the first one default to?")
    assert standalone_overlap(example, right) == pytest.approx(2 * 2 / (3 + 2))  # default, containerlogmaxsize; +value
    assert standalone_overlap(example, unchanged) == pytest.approx(2 * 1 / (3 + 2))  # "default" alone
    figures = standalone_figures([(example, right, 0.8), (example, unchanged, 0.0)])
    assert figures["filled"] == 0.5 and figures["rows"] == 2
