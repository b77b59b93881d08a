"""A team's own labeled questions (``optimize.user_questions``): read from CSV and JSONL files
written by hand, every bad row one line naming the row and the field, and run through
``optimize.evaluate --kb ... --questions FILE`` with the figures a built-in set gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from optimize import evaluate
from optimize.user_questions import UNANSWERABLE_GOLD, QuestionsFileError, load_questions_file
from tests.test_evaluate_modes import run_eval  # noqa: F401 - the fixture: four questions, the fake LM

DATA = Path(__file__).parent / "data" / "questions"


@pytest.mark.parametrize("name", ["acme.csv", "acme.jsonl"])
def test_csv_and_jsonl_give_the_same_rows(name):
    rows = load_questions_file(DATA / name)
    assert [(r["id"], r["question"], r["gold"], r["answerable"]) for r in rows] == [
        ("q1", "Who founded Acme Rockets?", ["Jane Roe", "J. Roe"], True),
        ("q2", "Who founded Acme?", ["Jane Roe"], True),
        ("q3", "Where is Acme based?", ["Ohio"], True),
        ("q4", "What is Acme's stock ticker?", UNANSWERABLE_GOLD, False)]


def test_a_csv_cell_may_hold_a_json_list(tmp_path):
    (tmp_path / "ours.csv").write_text('question,answers\nWhat is A1?,"[""Injection"", ""SQL injection""]"\n')
    assert load_questions_file(tmp_path / "ours.csv")[0]["gold"] == ["Injection", "SQL injection"]


@pytest.mark.parametrize("name, text, message", [
    ("bad.csv", "question,answers\nWho?,\n", r"bad\.csv:2: field 'answers' is empty; an answerable row needs"),
    ("bad.csv", "question,answers,answerable\nWho?,Ann,maybe\n",
     r"bad\.csv:2: field 'answerable' must be true or false, got 'maybe'"),
    ("bad.csv", "query,answers\nWho?,Ann\n",
     r"bad\.csv:1: the header has no 'question' column \(found: query, answers; expected: question, answers"),
    # the bug: a CSV cell '["Injection"' was taken as the gold string itself and scored every answer wrong
    ("bad.csv", 'question,answers\nWhat is A1?,"[""Injection"""\n',
     r"bad\.csv:2: field 'answers' starts like a JSON list but is not one"),
    ("bad.jsonl", '{"question": "Who?", "answers": ["Ann"]}\n{"question": "", "answers": ["B"]}\n',
     r"bad\.jsonl:2: field 'question' is missing or empty"),
    ("bad.jsonl", '{"question": "Who?", "answers": [1, 2]}\n',
     r"bad\.jsonl:1: field 'answers' must be a string or a list of strings, got list"),
    ("bad.jsonl", '{"question": "Who?", "answers": ["Ann"]\n', r"bad\.jsonl:1: not JSON"),
    ("bad.jsonl", '{"id": "a", "question": "Who?", "answers": "A"}\n{"id": "a", "question": "Why?", "answers": "B"}\n',
     r"bad\.jsonl: duplicate id 'a'"),
    ("bad.txt", "Who?\n", r"bad\.txt: a questions file is \.jsonl or \.csv, not \.txt"),
    ("empty.csv", "question,answers\n", r"empty\.csv: no question in it"),
])
def test_a_bad_row_is_one_line_naming_row_and_field(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(QuestionsFileError, match=message) as err:
        load_questions_file(tmp_path / name)
    assert "\n" not in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["acme.csv", "acme.jsonl"])
def test_evaluate_on_your_own_questions_gives_the_built_in_sets_figures(run_eval, tmp_path, name, capsys):
    code, out = run_eval("--modes", "rag,crag", out="builtin")
    assert code == 0
    (tmp_path / "notes.xyz").write_text("a file of a type the loader does not read")
    code, mine = run_eval("--modes", "rag,crag", "--kb", str(tmp_path), "--questions", str(DATA / name), out="mine")
    assert code == 0
    # the files the knowledge base left out are named, as ask and index name them
    assert "note: left out notes.xyz" in capsys.readouterr().err
    ours, theirs = (json.loads((d / "summary.json").read_text()) for d in (mine, out))
    assert ours["set"] == "acme" and ours["questions"] == str(DATA / name) and ours["web"] == "none"
    for mode in ("rag", "crag"):
        assert ours["modes"][mode]["accuracy"] == theirs["modes"][mode]["accuracy"] == 75.0
        for key in ("truthfulness", "answerable_right", "unanswerable_declined"):
            assert ours["modes"][mode][key] == theirs["modes"][mode][key], (mode, key)
    assert (mine / "risk_coverage.png").exists() and (mine / "results.csv").exists()


def test_evaluate_refuses_questions_without_a_knowledge_base(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CRAG_KB", raising=False)
    with pytest.raises(SystemExit) as err:
        evaluate.main(["--questions", str(DATA / "acme.csv"), "--out", str(tmp_path)])
    assert err.value.code == 2
    assert "--questions needs the knowledge base they are asked of: --kb PATH" in capsys.readouterr().err


def test_evaluate_names_the_bad_row_and_exits_2(tmp_path, capsys):
    (tmp_path / "q.csv").write_text("question,answers\nWho?,\n")
    assert evaluate.main(["--questions", str(tmp_path / "q.csv"), "--kb", str(tmp_path), "--out",
                          str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'q.csv'}:2: field 'answers' is empty; an answerable row " \
                                      "needs at least one gold answer (or set answerable to false)\n"


def test_the_operating_point_is_the_most_truthful_and_its_neighbours_are_shown():
    from optimize.operating_point import Labeled, choose, trade_at

    drafts = [Labeled(0.9, False, True, True), Labeled(0.7, False, True, True), Labeled(0.5, False, False, True),
              Labeled(0.4, False, False, False), Labeled(0.2, False, True, True), Labeled(0.1, True, False, False)]
    # at 0.5: right 0.9 and 0.7 kept (2), the wrong 0.5 answered (-1), both unanswerable declined (+2): +3 of 6
    assert trade_at(drafts, 0.5) == trade_at(drafts, 0.5).__class__(0.5, 2, 3, 2, 2, 50.0)
    chosen, lower, higher = choose(drafts)
    assert (chosen.accept, chosen.kept, chosen.declined, chosen.truthfulness) == (0.7, 2, 2, 66.7)
    assert (lower.accept, lower.truthfulness) == (0.5, 50.0) and (higher.accept, higher.truthfulness) == (0.9, 50.0)
    assert choose(drafts, 0.2)[0] == trade_at(drafts, 0.2)  # a team's own pick is kept as given
    assert trade_at(drafts, 0.0).declined == 1  # the abstaining draft is a decline at every point
