"""Broken corpora through ``ask --kb``, ``index`` (real subprocesses) and the Python API: exit code 2
and one line naming the file and the problem, never a traceback, never an index written."""

from __future__ import annotations

import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from program.retrieval import CorpusError
from tests.broken_inputs import BROKEN_CORPORA, build
from tests.service_process import ROOT, program_env

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

NAMES = sorted(BROKEN_CORPORA)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Every broken corpus, built once: ``{name: (path, pattern)}``."""
    root = tmp_path_factory.mktemp("broken")
    return {name: build(name, root / re.sub(r"\W+", "-", name)) for name in NAMES}


@pytest.fixture(scope="module")
def cli_runs(corpora, tmp_path_factory):
    """``ask --kb PATH`` (default model, nothing else given) and ``index PATH --out`` for every
    corpus, four processes at a time: ``{(command, name): CompletedProcess}``."""
    root = tmp_path_factory.mktemp("runs")
    env = program_env(root / "cache")
    jobs = {}
    for name, (path, _) in corpora.items():
        out = root / "index" / re.sub(r"\W+", "-", name)
        jobs["ask", name] = [sys.executable, "-m", "program", "ask", "How long does a refund take?", "--kb", str(path)]
        jobs["index", name] = [sys.executable, "-m", "program", "index", str(path), "--out", str(out)]

    def run(argv):
        return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(4) as pool:
        results = dict(zip(jobs, pool.map(run, jobs.values())))
    results["index-root"] = root / "index"
    return results


@pytest.mark.parametrize("command", ["ask", "index"])
@pytest.mark.parametrize("name", NAMES)
def test_the_cli_refuses_a_broken_corpus_in_one_line(name, command, corpora, cli_runs):
    run = cli_runs[command, name]
    _, pattern = corpora[name]
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert re.fullmatch(r"error: " + pattern + r".*", lines[0]), lines[0]
    assert run.stdout == ""
    if command == "index":
        assert not (cli_runs["index-root"] / re.sub(r"\W+", "-", name)).exists()  # nothing half-written


@pytest.mark.parametrize("name", NAMES)
def test_the_python_api_raises_a_corpus_error_naming_the_file(name, corpora, tmp_path, embedder):
    from program.app import resources

    path, pattern = corpora[name]
    with pytest.raises(CorpusError) as caught:
        resources.knowledge_base(path, tmp_path / "index")
    message = str(caught.value)
    assert "\n" not in message and re.match(pattern, message), message
    assert not (tmp_path / "index").exists()


def test_a_stray_document_cap_is_configurable(tmp_path, monkeypatch):
    from program.retrieval import load_documents

    (tmp_path / "a.md").write_text("# A\n\n" + "word " * 300)
    monkeypatch.setenv("CRAG_MAX_DOCUMENT_BYTES", "1000")
    with pytest.raises(CorpusError, match=r"a\.md is 0\.0 MB; one document may hold at most 0\.0 MB"):
        load_documents(tmp_path)
    monkeypatch.setenv("CRAG_MAX_DOCUMENT_BYTES", "2000")
    assert load_documents(tmp_path)[0].title == "A"


def test_a_json_string_holding_a_line_separator_stays_one_document(tmp_path):
    # str.splitlines() cut JSONL rows at U+2028, which JSON allows unescaped inside a string
    from program.retrieval import load_documents

    (tmp_path / "kb.jsonl").write_text('{"id": "a", "text": "one\u2028two"}\n', encoding="utf-8")
    assert [d.text for d in load_documents(tmp_path / "kb.jsonl")] == ["one\u2028two"]


def test_mixed_scripts_and_a_bom_load_as_text(tmp_path):
    from program.retrieval import load_documents

    (tmp_path / "kb.jsonl").write_bytes("\ufeff".encode() + '{"id": "ar", "text": "الاسترداد خلال 5 أيام. '
                                                            'Refund in 5 days. 返金は5日。"}\n'.encode())
    docs = load_documents(tmp_path / "kb.jsonl")
    assert docs[0].doc_id == "ar" and docs[0].text.startswith("الاسترداد")


def test_the_previous_index_survives_a_broken_update(tmp_path, embedder):
    from program.retrieval import KnowledgeBase

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "refunds.md").write_text("# Refunds\n\nA refund takes five business days.\n")
    out = tmp_path / "index"
    KnowledgeBase.build(docs, out, embedder)
    before = (out / "manifest.json").read_bytes()
    (docs / "broken.jsonl").write_text('{"id": "b", "text": \n')
    with pytest.raises(CorpusError, match="broken.jsonl:1"):
        KnowledgeBase.build(docs, out, embedder)
    assert (out / "manifest.json").read_bytes() == before
    assert KnowledgeBase.load(out, embedder).search("refund", 1)[0].text.startswith("A refund takes five")



LEFT_OUT = ["note: left out a.md: symlink loop", "note: left out b.md: symlink loop",
            "note: left out notes.rtf: unsupported type .rtf", "note: left out p.md: not a regular file (FIFO)"]


@pytest.fixture
def folder_with_strays(tmp_path):
    """A readable document beside a symlink loop, a FIFO (which would block a read for ever) and an RTF file."""
    import os

    from tests.service_process import write_docs

    docs = write_docs(tmp_path / "d")
    (docs / "a.md").symlink_to("b.md")
    (docs / "b.md").symlink_to("a.md")
    os.mkfifo(docs / "p.md")
    (docs / "notes.rtf").write_bytes(b"{\\rtf1 notes}")
    return docs


@pytest.mark.parametrize("command", ["index", "ask"])
def test_every_file_left_out_is_named_with_why_and_counted(command, folder_with_strays, tmp_path, served_fake_lm):
    docs = folder_with_strays
    argv = (["index", str(docs), "--out", str(tmp_path / "ix"), "--no-adapt"] if command == "index" else
            ["ask", "Who founded Acme Rockets?", "--kb", str(docs), "--model", "openai/fake", "--api-base",
             served_fake_lm.base, "--compiled", "none", "--web", "none", "--no-cache"])
    run = subprocess.run([sys.executable, "-m", "program", *argv], cwd=ROOT, env=program_env(tmp_path / "cache"),
                         capture_output=True, text=True, timeout=300)  # a read of the FIFO would hang here
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if line.startswith("note: ") and "left out" in line]
    assert notes == LEFT_OUT + [f"note: 4 file(s) left out of {docs}; the rest was read"]
    first = run.stdout.splitlines()[0]
    assert re.fullmatch(re.escape(f"indexed 2 chunks from {docs} into {tmp_path / 'ix'}: new index: 2 file(s) read, "
                                  "2 embedded (") + r"[\d.]+ s\)", first) if command == "index" \
        else first == "Acme Rockets was founded by Jane Roe [1]."


def test_a_fifo_as_the_corpus_is_refused_at_once(tmp_path):
    import os

    os.mkfifo(tmp_path / "kb.jsonl")
    run = subprocess.run([sys.executable, "-m", "program", "index", str(tmp_path / "kb.jsonl"), "--out",
                          str(tmp_path / "ix")], cwd=ROOT, env=program_env(tmp_path / "cache"),
                         capture_output=True, text=True, timeout=120)
    assert (run.returncode, run.stderr) == (2, f"error: corpus path {tmp_path / 'kb.jsonl'} is not a regular file "
                                               f"(FIFO)\n")
