"""Broken compiled folders through the Python API (``load_compiled``) and ``ask --compiled``: a one-line
``CompiledError`` / exit 2 naming the file, or a warning and the uncompiled predictor (degraded)."""

from __future__ import annotations

import json
import re
import sys
import warnings

import pytest

from program.app.compiled import CompiledError, save_compiled

from program.app.configuration import load_compiled
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, ListKnowledgeBase


def _save(folder):
    save_compiled(CRAG(None), {"lm": "fake", "dspy_version": __import__("dspy").__version__,
                               "thresholds": {"lower": 0.2, "upper": 0.6}}, folder)
    return folder


def _edit_json(path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _unhash(folder):
    """Drop the manifest's state_sha256, as in a compile saved before it was recorded."""
    _edit_json(folder / "manifest.json", lambda m: m.pop("state_sha256"))


def corrupt_state(f):
    (f / "crag.json").write_text('{"evaluator.grade": {"demos": [')
    _unhash(f)  # with the hash, the sha256 check refuses it first ("manifest of another state")


def corrupt_manifest(f):
    (f / "manifest.json").write_text('{"lm": "fake", "thresholds": ')


def state_not_an_object(f):
    (f / "crag.json").write_text("[1, 2, 3]")
    _unhash(f)


def manifest_not_an_object(f):
    (f / "manifest.json").write_text('"compiled"')


def threshold_out_of_range(f):
    _edit_json(f / "manifest.json", lambda m: m["thresholds"].update(upper=1.7))


def threshold_not_a_number(f):
    _edit_json(f / "manifest.json", lambda m: m["thresholds"].update(lower="low"))


def thresholds_crossed(f):
    _edit_json(f / "manifest.json", lambda m: m["thresholds"].update(lower=0.9, upper=0.3))


def lm_thresholds_crossed(f):
    _edit_json(f / "manifest.json",
               lambda m: m.update(lm_thresholds_by_corpus={"c0ffee": {"lower": 0.8, "upper": 0.7}}))


def lm_threshold_missing(f):
    _edit_json(f / "manifest.json", lambda m: m.update(lm_thresholds_by_corpus={"c0ffee": {"lower": 0.6}}))


def manifest_of_another_state(f):
    _edit_json(f / "crag.json", lambda s: s["evaluator.grade"].update(demos=[{"question": "q"}]))


def another_program_state(f):
    (f / "crag.json").write_text(json.dumps({"summarize.predict": {"demos": [], "signature": {}}}))
    _unhash(f)


def predictor_state_not_an_object(f):
    _edit_json(f / "crag.json", lambda s: s.update({"evaluator.grade": "compiled"}))
    _unhash(f)


def corrupt_judges(f):
    (f / "judges.json").write_text("{not json")


# confidence.json (python -m optimize.train_confidence): the answer-confidence model and its operating point
def corrupt_confidence(f):
    (f / "confidence.json").write_text('{"model": {"weights": ')


def accept_out_of_range(f):
    (f / "confidence.json").write_text(json.dumps({"model": {"weights": {"support": 1.0}, "bias": -1.0},
                                                   "accept": 1.5}))


def confidence_weight_not_a_number(f):
    (f / "confidence.json").write_text(json.dumps({"model": {"weights": {"support": "heavy"}}, "accept": 0.3}))


# refinement.json (python -m optimize.refine_recall): which knowledge bases are read refined
def corrupt_refinement(f):
    (f / "refinement.json").write_text('{"by_corpus": {')


REFUSED = {
    "corrupt state JSON": (corrupt_state, r"{f}/crag\.json is not valid JSON: Expecting value at line 1 column 32"),
    "corrupt manifest JSON": (corrupt_manifest, r"{f}/manifest\.json is not valid JSON: Expecting value at line 1 "
                                                r"column 30"),
    "state not an object": (state_not_an_object, r"{f}/crag\.json must hold a JSON object, not list"),
    "manifest not an object": (manifest_not_an_object, r"{f}/manifest\.json must hold a JSON object, not str"),
    "threshold out of range": (threshold_out_of_range, r"{f}/manifest\.json: thresholds\.upper must be "
                                                       r"a number in \[0, 1\], got 1\.7"),
    "threshold not a number": (threshold_not_a_number, r"{f}/manifest\.json: thresholds\.lower must be "
                                                       r"a number in \[0, 1\], got 'low'"),
    "thresholds crossed": (thresholds_crossed, r"{f}/manifest\.json: thresholds\.lower 0\.9 "
                                               r"is above thresholds\.upper 0\.3"),
    "LM thresholds crossed": (lm_thresholds_crossed, r"{f}/manifest\.json: lm_thresholds_by_corpus\.c0ffee\.lower 0\.8 "
                                                     r"is above lm_thresholds_by_corpus\.c0ffee\.upper 0\.7"),
    "LM threshold missing": (lm_threshold_missing, r"{f}/manifest\.json: lm_thresholds_by_corpus\.c0ffee\.upper "
                                                   r"must be "
                                                   r"a number in \[0, 1\], got None"),
    "manifest of another state": (manifest_of_another_state,
                                  r"{f}/crag\.json does not match {f}/manifest\.json \(sha256 [0-9a-f]{{12}}, "
                                  r"the manifest says [0-9a-f]{{12}}\): restore both files or recompile"),
    "another program's state": (another_program_state, r"{f}/crag\.json holds no predictor of this program "
                                                        r"\(it has summarize\.predict\): the state of another program"),
    "predictor state not an object": (predictor_state_not_an_object,
                                      r"{f}/crag\.json: the state of evaluator\.grade is not a predictor's state"),
    "corrupt judges.json": (corrupt_judges, r".*{f}/judges\.json.*"),
    "corrupt confidence.json": (corrupt_confidence, r"{f}/confidence\.json is not valid JSON: Expecting value "
                                                    r"at line 1 "
                                                    r"column 23"),
    "accept out of range": (accept_out_of_range, r"{f}/confidence\.json: 'accept' must be "
                                                 r"a number in \[0, 1\], got 1\.5"),
    "corrupt refinement.json": (corrupt_refinement, r"{f}/refinement\.json is not valid JSON: Expecting property name "
                                                    r"enclosed in double quotes at line 1 column 16"),
    "confidence weight not a number": (confidence_weight_not_a_number,
                                       r"{f}/confidence\.json: confidence model: weights and bias must be numbers "
                                       r"\(could not convert string to float: 'heavy'\)"),
}


def _pattern(name, folder):
    return REFUSED[name][1].format(f=re.escape(str(folder)))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_load_compiled_refuses_a_broken_folder_in_one_line(name, tmp_path, fake_lm):
    from program.judges import JudgesFileError

    folder = _save(tmp_path / "compiled")
    REFUSED[name][0](folder)
    with pytest.raises((CompiledError, JudgesFileError)) as caught:
        load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert "\n" not in str(caught.value) and re.fullmatch(_pattern(name, folder), str(caught.value)), str(caught.value)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_ask_refuses_a_broken_compiled_folder_with_exit_2(name, tmp_path, capsys, monkeypatch):
    from program.app.cli import main

    folder = _save(tmp_path / "compiled")
    REFUSED[name][0](folder)
    monkeypatch.setattr("program.app.resources.knowledge_base", lambda *a: ListKnowledgeBase([FOUNDING]))
    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: pytest.fail("no model should be loaded"))
    assert main(["ask", "Who founded Acme Rockets?", "--compiled", str(folder), "--web", "none"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch("error: " + _pattern(name, folder), err[0]), err


def test_a_missing_folder_is_refused_before_anything_loads(tmp_path, capsys, monkeypatch):
    from program.app.cli import main

    monkeypatch.setattr("program.app.resources.knowledge_base",
                        lambda *a: pytest.fail("no knowledge base should be loaded"))
    assert main(["ask", "Who founded Acme Rockets?", "--compiled", str(tmp_path / "gone")]) == 2
    assert capsys.readouterr().err == f"error: --compiled {tmp_path / 'gone'}: no compiled program there\n"
    with pytest.raises(FileNotFoundError, match="python -m optimize.compile"):
        load_compiled(tmp_path / "gone", knowledge_base=ListKnowledgeBase([]), web=None, embedder=None)


def test_another_dspy_version_loads_with_a_one_line_warning(tmp_path, fake_lm):
    folder = _save(tmp_path / "compiled")
    _edit_json(folder / "manifest.json", lambda m: m.update(dspy_version="2.6.27"))
    with pytest.warns(UserWarning, match=r"compiled with DSPy 2\.6\.27, running 3\.4\.\d+; its prompts load but may "
                                         r"behave differently \(recompile: python -m optimize.compile --out DIR\)"):
        program = load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert program(question="Who founded Acme Rockets?").answer == "Acme Rockets was founded by Jane Roe [1]."


def test_another_signatures_state_keeps_the_uncompiled_predictor(tmp_path, fake_lm):
    folder = _save(tmp_path / "compiled")
    _edit_json(folder / "crag.json", lambda s: s["generator.generate"]["signature"].update(
        fields=[{"prefix": "Topic:", "description": "x"}, {"prefix": "Essay:", "description": "y"}]))
    _unhash(folder)
    with pytest.warns(UserWarning, match="generator.generate was compiled for another signature"):
        program = load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert list(program.generator.generate.signature.input_fields) == ["question", "context"]
    assert program(question="Who founded Acme Rockets?").answer == "Acme Rockets was founded by Jane Roe [1]."


def test_a_save_killed_between_its_two_renames_is_completed_by_the_next_load(tmp_path, fake_lm):
    folder = _save(tmp_path / "compiled")
    old_manifest = (folder / "manifest.json").read_text()
    program = CRAG(None)
    program.generator.generate.demos = [__import__("dspy").Example(question="q", context=["c"], answer="a")]
    save_compiled(program, {"lm": "second", "thresholds": {"lower": 0.1, "upper": 0.7}}, folder)
    # put the folder back in the state a kill between os.replace(state) and os.replace(manifest) leaves
    (folder / "manifest.json.new").write_text((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(old_manifest)
    loaded = load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert (loaded.settings.lower, loaded.settings.upper) == (0.1, 0.7) and len(loaded.generator.generate.demos) == 1
    assert not (folder / "manifest.json.new").exists() and json.loads(
        (folder / "manifest.json").read_text())["lm"] == "second"


def test_the_cli_prints_warnings_as_one_line(tmp_path, capsys, monkeypatch):
    from program.app.cli import main

    folder = _save(tmp_path / "compiled")
    _edit_json(folder / "manifest.json", lambda m: m.update(dspy_version="2.6.27"))
    monkeypatch.setattr("program.app.resources.knowledge_base", lambda *a: ListKnowledgeBase([FOUNDING]))
    monkeypatch.setattr("program.app.resources.embedder", lambda: None)
    from tests.conftest import default_rules
    from tests.fake_lm import FakeLM

    monkeypatch.setattr("program.lm.configure.configure_lm",
                        lambda *a, **k: __import__("dspy").configure(lm=FakeLM(default_rules()))
                        or FakeLM(default_rules()))
    def show(message, category, filename, lineno, file=None, line=None):  # Python's default, unlike pytest's
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        monkeypatch.setattr(warnings, "showwarning", show)
        assert main(["ask", "Who founded Acme Rockets?", "--compiled", str(folder), "--web", "none"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^warning: .*manifest\.json: compiled with DSPy 2\.6\.27, running 3\.4", err, re.M), err
    assert "UserWarning" not in err
