"""Judges adapted to a knowledge base from its own documents: built, saved by documents, reused, loaded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from program.adaptation.adapt import adapt_judges
from program.adaptation.synthetic_rows import document_source
from program.judges.adapted import adapted_dir, adapted_state, load_adapted, write_judges
from program.judges.store import corpus_key

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

ROOT = Path(__file__).resolve().parent.parent
HANDBOOK = ROOT / "eval_sets" / "handbook" / "kb"
DOCS = sorted(HANDBOOK.glob("*.md"))


def _kb(folder: Path, docs: list[Path], embedder):
    from program.retrieval import KnowledgeBase

    folder.mkdir(parents=True, exist_ok=True)
    for doc in docs:
        shutil.copy(doc, folder / doc.name)
    return KnowledgeBase.build(folder, folder.parent / f"{folder.name}-index", embedder)


@pytest.fixture(scope="module", autouse=True)
def state_folder(tmp_path_factory):
    """The state folder of this module's knowledge bases (never the project's cache)."""
    folder = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("CRAG_STATE_DIR", str(folder))
        yield folder


@pytest.fixture(scope="module")
def kbs(tmp_path_factory, embedder):
    """A 12-document knowledge base to adapt to, and another whose rows stand in for the labeled sources."""
    root = tmp_path_factory.mktemp("adapt")
    return _kb(root / "own", DOCS[:12], embedder), _kb(root / "other", DOCS[12:24], embedder)


@pytest.fixture(scope="module")
def other_source(kbs, embedder):
    return document_source("other", kbs[1], embedder, log=lambda m: None)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """A copy of the committed compile to adapt beside (shared: each adaptation is a fit)."""
    out = tmp_path_factory.mktemp("compiled") / "compiled"
    shutil.copytree(ROOT / "compiled", out, ignore=shutil.ignore_patterns("adapted"))
    return out


def _adapt(kb, compiled, other_source, embedder, **kw):
    return adapt_judges(kb, compiled, name="own", sources=[other_source], embedder=embedder, log=lambda m: None,
                        progress=False, **kw)


def test_adapting_saves_judges_with_the_knowledge_base_and_reuses_them(kbs, compiled, other_source, embedder,
                                                                      state_folder):
    kb = kbs[0]
    first = _adapt(kb, compiled, other_source, embedder, force=True)
    assert not first.reused and first.refresh.how == "made"
    # in the state folder, keyed by where the index lives and by the compile, never beside the compile
    assert first.path == f"{adapted_dir(compiled, kb)}/judges.json"
    assert adapted_dir(compiled, kb).is_relative_to(state_folder / "knowledge-bases")
    assert not (compiled / "adapted").exists()
    a = first.judges.adapted
    assert (a["corpus"], a["name"], a["documents"], a["sources"]) == (corpus_key(kb), "own", 12, ["other"])
    assert 0 < a["rows"]["questions_kept"] <= a["rows"]["questions_asked"]
    assert a["rows"]["passage"] > a["rows"]["questions_kept"] and a["rows"]["support"] > 0
    # the evaluator's thresholds were calibrated on this knowledge base's own questions
    assert corpus_key(kb) in first.judges.thresholds_by_corpus
    assert "judges adapted to own: 12 documents" in first.line()

    again = _adapt(kb, compiled, other_source, embedder)
    assert again.reused and again.seconds < 5
    assert again.judges.adapted["stamp"] == a["stamp"]
    assert "reused" in again.line()
    assert _adapt(kb, compiled, other_source, embedder, force=True).reused is False


def test_judges_are_picked_for_the_documents_they_were_fit_on_only(kbs, compiled, other_source, embedder, tmp_path):
    _adapt(kbs[0], compiled, other_source, embedder)
    other = _kb(tmp_path / "changed", DOCS[:11], embedder)
    assert adapted_dir(compiled, other) != adapted_dir(compiled, kbs[0])  # another index: another state
    assert load_adapted(compiled, other) is None
    assert load_adapted(compiled, kbs[0]).adapted["name"] == "own"


def test_a_changed_file_refits_from_the_rows_of_the_others(tmp_path, compiled, other_source, embedder):
    """One file changed: its rows are made again, the other eleven's are kept, the judges refit;
    the next version of the knowledge base is judged by them, the last one's no longer."""
    from program.adaptation.own_rows import ROWS_FILE
    from program.adaptation.labeled import pairs_from_bytes

    kb = _kb(tmp_path / "kb", DOCS[:12], embedder)
    first = _adapt(kb, compiled, other_source, embedder)
    assert first.refresh.how == "made"
    meta1, (rows1,) = pairs_from_bytes(adapted_state(compiled, kb).read(ROWS_FILE))
    changed = Path(kb.manifest["source_path"]) / DOCS[3].name
    changed.write_text(changed.read_text() + "\n\n## Parking permits\n\nParking permits are renewed every January.\n")
    kb2 = type(kb).build(kb.manifest["source_path"], kb.index_dir, embedder)
    assert kb2.changes.line().startswith("1 changed;")
    assert load_adapted(compiled, kb2) is None  # fit on the version before
    second = _adapt(kb2, compiled, other_source, embedder)
    assert (second.refresh.how, second.refresh.changed) == ("refit", (DOCS[3].name,))
    assert 0 < second.refresh.share < 0.25 and "refit: rows of 1 changed file(s) made again" in second.line()
    assert load_adapted(compiled, kb2) is not None and second.judges.adapted["rows_refresh"] == "refit"
    meta2, (rows2,) = pairs_from_bytes(adapted_state(compiled, kb2).read(ROWS_FILE))
    assert meta2["files"] == kb2.manifest["files"] and meta1["files"] != meta2["files"]
    # the unchanged files' rows are the very ones of the first adaptation; the changed file gave its own again
    unchanged = {g for g, f in meta1["groups"].items() if f != DOCS[3].name}
    assert unchanged and unchanged <= set(meta2["groups"])

    def passage_rows(rows, groups):
        return sorted((g, tuple(d)) for g, d in zip(rows.passage.groups, rows.passage.dense) if g in groups)

    assert passage_rows(rows2, unchanged) == passage_rows(rows1, unchanged)
    assert DOCS[3].name in meta2["groups"].values()


def test_past_a_quarter_of_the_chunks_changed_every_row_is_made_again(tmp_path, compiled, other_source, embedder):
    kb = _kb(tmp_path / "kb", DOCS[:8], embedder)
    _adapt(kb, compiled, other_source, embedder)
    folder = Path(kb.manifest["source_path"])
    for doc in DOCS[:3]:
        (folder / doc.name).unlink()
    kb2 = type(kb).build(folder, kb.index_dir, embedder)
    second = _adapt(kb2, compiled, other_source, embedder)
    assert second.refresh.how == "made" and second.refresh.share > 0.25
    assert "over 25%" in second.refresh.why


def test_a_failed_write_keeps_the_previous_adaptation(kbs, compiled, other_source, embedder, monkeypatch):
    first = _adapt(kbs[0], compiled, other_source, embedder)
    before = Path(first.path).read_bytes()

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("program.atomic.os.replace", full_disk)  # every atomic write renames through it
    with pytest.raises(OSError):  # the write of an adaptation (``adapt_judges`` ends with it)
        write_judges(first.judges, adapted_state(compiled, kbs[0]))
    assert Path(first.path).read_bytes() == before
    assert not [p.name for p in Path(first.path).parent.iterdir() if p.name.startswith(".")]
    assert load_adapted(compiled, kbs[0]) is not None


def test_load_compiled_picks_the_adapted_judges_for_their_knowledge_base_only(kbs, compiled, other_source,
                                                                              embedder, fake_lm):
    from program.app.configuration import load_compiled

    _adapt(kbs[0], compiled, other_source, embedder)
    own = load_compiled(compiled, knowledge_base=kbs[0], web="none", embedder=embedder)
    report = own.judges_report()
    assert report["adapted"] and report["calibrated_here"] and report["corpus"] == corpus_key(kbs[0])
    assert report["judgments"] == {"passage": "trained", "strip": "trained", "support": "trained",
                                   "usefulness": "trained"}
    assert (own.settings.lower, own.settings.upper) == tuple(own.judges.thresholds_by_corpus[corpus_key(kbs[0])][k]
                                           for k in ("lower", "upper"))
    result = own(question="How do I request advanced sick leave?")
    assert result.trace.judges == report
    assert result.to_dict()["trace"]["judges"]["adapted"] is True

    other = load_compiled(compiled, knowledge_base=kbs[1], web="none", embedder=embedder)
    assert other.judges_report()["adapted"] is False
    assert other.judges_report()["calibrated_here"] is False


def test_compile_kb_reports_a_missing_knowledge_base_in_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "optimize.compile", "--kb", str(tmp_path / "nowhere"),
                          "--out", str(tmp_path / "c")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 2
    assert out.stderr.startswith("error: ") and len(out.stderr.strip().splitlines()) == 1
    assert "nowhere" in out.stderr


def test_compile_kb_refuses_an_unknown_domain_to_leave_out(tmp_path):
    out = subprocess.run([sys.executable, "-m", "optimize.compile", "--kb", str(HANDBOOK), "--leave-out", "gitlab"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 2
    assert "--leave-out: unknown domain(s) gitlab" in out.stderr


def test_leave_out_flags_need_kb():
    from optimize.compile import main

    with pytest.raises(SystemExit) as exc:
        main(["--leave-out", "kubernetes"])
    assert exc.value.code == 2


def test_index_no_adapt_says_so(tmp_path, capsys):
    from program.app.cli import main

    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(DOCS[0], folder / DOCS[0].name)
    assert main(["index", str(folder), "--out", str(tmp_path / "index"), "--no-adapt"]) == 0
    out = capsys.readouterr().out
    assert "indexed" in out and "judges not adapted (--no-adapt)" in out


def test_index_adapts_by_default(kbs, tmp_path, other_source, fake_lm, capsys, monkeypatch):
    """``index`` adapts after indexing, into the compile named by --compiled (labeled sources
    stubbed), and writes the reader's demo from a few questions written for its documents."""
    from types import SimpleNamespace

    from program.app.cli import main
    from program.app.configuration import load_compiled
    from program.retrieval import KnowledgeBase
    from signatures import WriteQuestion
    from tests.test_transfer import _first_sentence

    compiled = tmp_path / "compiled"
    shutil.copytree(ROOT / "compiled", compiled, ignore=shutil.ignore_patterns("adapted"))
    fake_lm.rules[WriteQuestion] = _first_sentence
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: SimpleNamespace(copy=lambda **kw: fake_lm))
    monkeypatch.setattr("program.adaptation.adapt.load_labeled", lambda directory, leave_out=(): [other_source])
    folder = Path(kbs[0].manifest["source_path"])
    assert main(["index", str(folder), "--out", str(tmp_path / "index"), "--compiled", str(compiled)]) == 0
    out = capsys.readouterr().out
    assert "judges adapted to own: 12 documents" in out
    state = adapted_dir(compiled, KnowledgeBase.load(tmp_path / "index"))
    saved = json.loads((state / "judges.json").read_text())
    assert saved["adapted"]["sources"] == ["other"]
    assert fake_lm.calls["WriteQuestion"] == 4  # headings adapt the judges; four written questions, the demo
    demo = json.loads((state / "reader_demo.json").read_text())
    assert f"reader demo written from {demo['chunk_id']}: {demo['question']}" in out
    assert demo["answer"] in " ".join(demo["context"]) and demo["context"][0].startswith("[1] ")
    # the handbook holds neither compiled demo (PopQA's, the help centre's): the reader reads its own only
    reader = load_compiled(compiled, knowledge_base=KnowledgeBase.load(tmp_path / "index"),
                           web="none").generator.generate
    assert [d["question"] for d in reader.demos] == [demo["question"]]  # as DSPy loads any saved demo: a dict


def test_ask_says_who_judged(kbs, compiled, other_source, embedder, fake_lm, capsys, monkeypatch):
    from program.app.cli import judges_line

    _adapt(kbs[0], compiled, other_source, embedder)
    from program.app.configuration import load_compiled

    report = load_compiled(compiled, knowledge_base=kbs[0], web="none", embedder=embedder).judges_report()
    assert judges_line(report) == ("judges: passage trained, strip trained, support trained, usefulness trained; "
                                   "adapted to this knowledge base from its documents")
    other = load_compiled(compiled, knowledge_base=kbs[1], web="none", embedder=embedder).judges_report()
    assert judges_line(other).endswith("NOT adapted to this knowledge base (adapt: python -m program index PATH)")


def _without_headings(folder: Path, docs: list[Path]) -> Path:
    """The documents as plain text: their paragraphs without a heading line."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, doc in enumerate(docs):
        body = "\n".join(line for line in doc.read_text(encoding="utf-8").splitlines() if not line.startswith("#"))
        (folder / f"doc{i:02d}.txt").write_text(body, encoding="utf-8")
    return folder


def test_how_many_questions_the_documents_decide(kbs, tmp_path, embedder):
    from program.adaptation.adapt import AUTO_QUESTIONS, AUTO_TIME_CAP, DEFAULT_TIME_CAP, questions_to_write
    from program.retrieval import KnowledgeBase

    assert questions_to_write(kbs[0], None, None) == (0, DEFAULT_TIME_CAP, None)  # headings to ask from
    plain = KnowledgeBase.build(_without_headings(tmp_path / "plain", DOCS[:6]), tmp_path / "plain-index", embedder)
    questions, cap, note = questions_to_write(plain, None, None)
    assert (questions, cap) == (AUTO_QUESTIONS, AUTO_TIME_CAP) == (40, 540.0)
    assert note.startswith("0 heading(s) to ask from: the LM writes up to 40 questions")
    assert questions_to_write(plain, 0, None) == (0, DEFAULT_TIME_CAP, None)  # asked for headings only
    assert questions_to_write(plain, None, 60.0)[:2] == (40, 60.0)


def test_index_adapts_a_knowledge_base_without_headings_from_written_questions(
        tmp_path, other_source, fake_lm, monkeypatch, capsys):
    """The bug: ``index`` warned "no heading" and adapted nothing; now the LM writes its questions."""
    from types import SimpleNamespace

    from program.app.cli import main
    from program.retrieval import KnowledgeBase
    from signatures import WriteQuestion
    from tests.test_transfer import _first_sentence

    fake_lm.rules[WriteQuestion] = _first_sentence
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("program.lm.configure.configure_lm", lambda *a, **k: SimpleNamespace(copy=lambda **kw: fake_lm))
    monkeypatch.setattr("program.adaptation.adapt.load_labeled", lambda directory, leave_out=(): [other_source])
    compiled = tmp_path / "compiled"
    shutil.copytree(ROOT / "compiled", compiled, ignore=shutil.ignore_patterns("adapted"))
    folder = _without_headings(tmp_path / "plain", DOCS[:12])
    assert main(["index", str(folder), "--out", str(tmp_path / "index"), "--compiled", str(compiled)]) == 0
    captured = capsys.readouterr()
    assert "note: plain: 0 heading(s) to ask from: the LM writes up to 40 questions" in captured.err
    assert 12 <= fake_lm.calls["WriteQuestion"] <= 40
    assert "judges adapted to plain: 12 documents" in captured.out
    state = adapted_dir(compiled, KnowledgeBase.load(tmp_path / "index"))
    saved = json.loads((state / "judges.json").read_text())
    assert saved["adapted"]["questions"] == 40 and saved["adapted"]["rows"]["written_kept"] > 0
    # the bug: the operating point was set only with an explicit --questions
    point = json.loads((state / "operating_point.json").read_text())
    assert point["answerable"] == 12 and point["decline"] == 0.1
    assert re.search(r"^operating point: accept 0\.\d\d declines 10% of 12 of its own questions and \d+% of "
                     r"\d+ look-alikes \(set in \d+ s\)$", captured.out, re.M)
