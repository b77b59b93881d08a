"""PDF and Office files are converted in a child process with a time limit: a converter that runs
past it (or dies) is stopped, its file named in one line and left out, and the next file is read
by a new child; a PDF's page progress still comes back. The converters here stand in for a
pathological file: the child imports them from this module by name."""

from __future__ import annotations

import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from program.retrieval.corpus import CorpusError, load_documents
from program.retrieval.formats import convert
from program.retrieval.formats import worker as worker_module
from program.retrieval.formats.worker import ConvertWorker, convert_timeout

DATA = Path(__file__).parent / "data" / "documents"


def sleepy_convert(path: Path, progress=None):
    """``formats.convert``, except that a file named ``slow*`` takes a minute."""
    if path.name.startswith("slow"):
        time.sleep(60)
    return convert(path, progress)


def dying_convert(path: Path, progress=None):
    """``formats.convert``, except that the process dies on a file named ``dies*`` (as when killed for memory)."""
    if path.name.startswith("dies"):
        os.kill(os.getpid(), signal.SIGKILL)
    return convert(path, progress)


def broken_convert(path: Path, progress=None):
    """A converter with a bug: a file it cannot handle raises something that is not a DocumentError."""
    raise RecursionError("maximum recursion depth exceeded")


@pytest.fixture
def folder(tmp_path):
    """A Markdown file, a PDF, and after them (sorted) a second PDF, read only if the child is replaced."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a-notes.md").write_text("# Notes\n\nAcme Rockets was founded in 1999.\n")
    shutil.copy(DATA / "pdflatex-4-pages.pdf", docs / "slow.pdf")
    shutil.copy(DATA / "pdflatex-4-pages.pdf", docs / "dies.pdf")
    shutil.copy(DATA / "pdflatex-4-pages.pdf", docs / "z-after.pdf")
    return docs


def test_a_converter_past_the_time_limit_is_stopped_and_the_rest_read(folder, monkeypatch):
    monkeypatch.setattr(worker_module, "convert", sleepy_convert)
    monkeypatch.setenv("CRAG_CONVERT_TIMEOUT", "1")
    report: dict = {}
    start = time.monotonic()
    docs = load_documents(folder, report)
    assert time.monotonic() - start < 30
    assert [d.doc_id for d in docs] == ["a-notes.md", "dies.pdf", "z-after.pdf"]
    assert report["unreadable"] == [f"{folder / 'slow.pdf'}: conversion took longer than 1 s; left out "
                                    "(raise CRAG_CONVERT_TIMEOUT if it is meant)"]


def test_the_time_limit_holds_in_a_thread_that_is_not_the_main_one(folder, monkeypatch):
    # a reload of the knowledge base would run in a thread of the service: no SIGALRM there
    monkeypatch.setattr(worker_module, "convert", sleepy_convert)
    monkeypatch.setenv("CRAG_CONVERT_TIMEOUT", "1")
    report: dict = {}
    with ThreadPoolExecutor(1) as pool:
        docs = pool.submit(load_documents, folder, report).result(timeout=60)
    assert len(docs) == 3 and report["unreadable"][0].endswith("conversion took longer than 1 s; left out "
                                                               "(raise CRAG_CONVERT_TIMEOUT if it is meant)")


def test_a_converter_that_dies_leaves_its_file_out(folder, monkeypatch):
    monkeypatch.setattr(worker_module, "convert", dying_convert)
    monkeypatch.setenv("CRAG_CONVERT_TIMEOUT", "20")  # slow.pdf converts: it is only dies.pdf that kills
    report: dict = {}
    docs = load_documents(folder, report)
    assert [d.doc_id for d in docs] == ["a-notes.md", "slow.pdf", "z-after.pdf"]
    assert report["unreadable"] == [f"{folder / 'dies.pdf'}: the conversion stopped (killed by signal 9); left out"]


def test_a_converter_bug_leaves_the_file_out_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_module, "convert", broken_convert)
    shutil.copy(DATA / "pdflatex-4-pages.pdf", tmp_path / "a.pdf")
    (tmp_path / "b.md").write_text("# B\n\nText.\n")
    report: dict = {}
    assert [d.doc_id for d in load_documents(tmp_path, report)] == ["b.md"]
    assert report["unreadable"] == [f"{tmp_path / 'a.pdf'}: conversion failed (RecursionError: maximum recursion "
                                    "depth exceeded)"]


def test_page_progress_comes_back_from_the_child():
    seen = []
    with ConvertWorker() as worker:
        converted = worker.convert(DATA / "pdflatex-4-pages.pdf", lambda done, total: seen.append((done, total)))
        assert "vulnerability statistics" in worker.convert(DATA / "owasp-top10-2013-change-log.docx").text
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
    assert converted.pages == 4 and "<!-- page 4 -->" in converted.text


def test_the_time_limit_comes_from_the_environment(monkeypatch):
    assert convert_timeout() == 600
    monkeypatch.setenv("CRAG_CONVERT_TIMEOUT", "2.5")
    assert convert_timeout() == 2.5
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv("CRAG_CONVERT_TIMEOUT", bad)
        with pytest.raises(CorpusError, match="^CRAG_CONVERT_TIMEOUT must be a number of seconds above 0"):
            convert_timeout()
