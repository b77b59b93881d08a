"""Office files are zip archives, and a 300 KB ``.docx`` can inflate to 300 MB: refused from its zip
directory before anything is inflated (each limit in one line naming the file, the member and the
variable that raises it), and a member whose data runs past its declared size is cut there."""

from __future__ import annotations

import glob
import subprocess
import sys
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from program.retrieval.corpus import CorpusError, load_documents
from program.retrieval.formats import DocumentError, check
from program.retrieval.formats.archive import (DEFAULT_MAX_ARCHIVE_MEMBERS, DEFAULT_MAX_INFLATE_RATIO,
                                               DEFAULT_MAX_INFLATED_BYTES, DEFAULT_MAX_INFLATED_TOTAL_BYTES,
                                               READ_CHUNK, ArchiveLimits, bound_zip_reads, check_archive)
from tests.service_process import ROOT, program_env
from tests.zip_bombs import docx_bomb

OWASP = ROOT / "eval_sets" / "owasp" / "kb"


def office_file(path: Path, members: dict[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> Path:
    with zipfile.ZipFile(path, "w", method) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def filler(n: int) -> bytes:
    """About ``n`` bytes (under 1 MiB: how well they deflate is not looked at)."""
    return bytes(range(256)) * (n // 256)


def refusal(path: Path) -> str:
    with pytest.raises(DocumentError) as err:
        check(path)
    return str(err.value)


def test_a_member_over_the_cap_is_named_with_its_size(tmp_path):
    bomb = docx_bomb(tmp_path / "top.docx")
    assert bomb.stat().st_size < 400_000
    assert refusal(bomb) == (f"{bomb}: word/document.xml inflates to 300.0 MB, over the 100.0 MB cap for one "
                             "member of an Office file (raise CRAG_MAX_INFLATED_BYTES if it is meant)")


def test_the_member_cap_is_set_by_the_environment(tmp_path, monkeypatch):
    docx = office_file(tmp_path / "a.docx", {"word/document.xml": filler(150_000)})
    check(docx)
    monkeypatch.setenv("CRAG_MAX_INFLATED_BYTES", "100000")
    assert refusal(docx) == (f"{docx}: word/document.xml inflates to 146.2 KB, over the 97.7 KB cap for one member "
                             "of an Office file (raise CRAG_MAX_INFLATED_BYTES if it is meant)")


def test_members_over_the_total_cap_are_refused(tmp_path, monkeypatch):
    xlsx = office_file(tmp_path / "a.xlsx", {f"xl/worksheets/sheet{i}.xml": filler(100_000) for i in range(3)})
    check(xlsx)
    monkeypatch.setenv("CRAG_MAX_INFLATED_TOTAL_BYTES", "250000")
    assert refusal(xlsx) == (f"{xlsx} inflates to 292.5 KB in all, over the 244.1 KB cap for an Office file "
                             "(raise CRAG_MAX_INFLATED_TOTAL_BYTES if it is meant)")


def test_a_member_that_inflates_past_the_ratio_is_refused(tmp_path, monkeypatch):
    pptx = office_file(tmp_path / "a.pptx", {"ppt/slides/slide1.xml": b"a" * 2**21})  # 2 MiB deflate ~500-fold
    message = refusal(pptx)
    assert message.startswith(f"{pptx}: ppt/slides/slide1.xml inflates ") and " times (" in message
    assert message.endswith(" to 2.0 MB), over the 100-fold cap for a member of an Office file "
                            "(raise CRAG_MAX_INFLATE_RATIO if it is meant)")
    monkeypatch.setenv("CRAG_MAX_INFLATE_RATIO", "2000")
    check(pptx)


def test_a_small_member_may_deflate_well(tmp_path):
    check(office_file(tmp_path / "a.docx", {"word/styles.xml": b"a" * (2**20 - 1)}))  # under 1 MiB: no ratio


def test_more_members_than_the_cap_are_refused_before_the_directory_is_read(tmp_path, monkeypatch):
    docx = office_file(tmp_path / "a.docx", {f"word/part{i}.xml": b"<p/>" for i in range(8)})
    check(docx)
    monkeypatch.setenv("CRAG_MAX_ARCHIVE_MEMBERS", "5")
    assert refusal(docx) == (f"{docx} holds 8 members, over the 5 cap for an Office file "
                             "(raise CRAG_MAX_ARCHIVE_MEMBERS if it is meant)")


def test_a_directory_too_large_for_the_member_cap_is_refused(tmp_path, monkeypatch):
    # names of 4,000 characters: a directory of 40 KB, more than 20 members of an Office file need
    docx = office_file(tmp_path / "a.docx", {f"word/{i}{'x' * 4000}.xml": b"<p/>" for i in range(10)})
    monkeypatch.setenv("CRAG_MAX_ARCHIVE_MEMBERS", "20")
    assert refusal(docx).startswith(f"{docx}: its zip directory takes 39.")


def test_a_member_compressed_with_bzip2_is_refused(tmp_path):
    # zipfile inflates bzip2 and LZMA with no bound on the output; Office files use deflate only
    docx = office_file(tmp_path / "a.docx", {"word/document.xml": b"<p/>"}, zipfile.ZIP_BZIP2)
    assert refusal(docx) == (f"{docx}: word/document.xml is compressed with bzip2; an Office file is deflated or "
                             "stored, nothing else (its reader would inflate it without a bound)")


def test_a_file_that_is_not_a_zip_is_named(tmp_path):
    fake = tmp_path / "old.xlsx"
    fake.write_bytes(b"\xd0\xcf\x11\xe0 an old binary workbook renamed")
    assert refusal(fake) == f"{fake} is not a readable .xlsx file (not a zip archive: File is not a zip file)"


@pytest.mark.parametrize("name", ["CRAG_MAX_INFLATED_BYTES", "CRAG_MAX_INFLATED_TOTAL_BYTES",
                                  "CRAG_MAX_INFLATE_RATIO", "CRAG_MAX_ARCHIVE_MEMBERS"])
def test_a_limit_that_is_not_a_whole_number_is_one_error(name, monkeypatch):
    monkeypatch.setenv(name, "lots")
    with pytest.raises(CorpusError, match=f"^{name} must be a whole number of 1 or more, got 'lots'$"):
        ArchiveLimits.from_env()


def test_every_real_office_file_passes_with_room_to_spare():
    # a tenth of each size cap, a fifth of the ratio: the OWASP releases as published still pass
    tight = ArchiveLimits(DEFAULT_MAX_INFLATED_BYTES // 10, DEFAULT_MAX_INFLATED_TOTAL_BYTES // 10,
                          DEFAULT_MAX_INFLATE_RATIO // 5, DEFAULT_MAX_ARCHIVE_MEMBERS // 10)
    files = [Path(f) for f in sorted(glob.glob(str(OWASP / "*.*x")))]
    assert len(files) == 10
    for f in files:
        check_archive(f, tight)


def test_a_member_longer_than_it_declares_is_cut_there_without_inflating_the_rest(tmp_path, monkeypatch):
    # its directory says 4 KB, its data inflates to 100 MB, its CRC is the 4 KB prefix's: zipfile returns
    # the 4 KB, but one read() first inflates up to 1 GiB (210 MB measured here); bounded, one chunk
    lie = docx_bomb(tmp_path / "lie.docx", megabytes=100, declared=4096)
    check(lie)  # nothing to see in the directory
    monkeypatch.setattr(zipfile.ZipExtFile, "MAX_N", zipfile.ZipExtFile.MAX_N)  # put back after the test
    bound_zip_reads()
    with zipfile.ZipFile(lie) as archive:
        tracemalloc.start()
        try:
            data = archive.read("word/document.xml")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert data == b"a" * 4096
    assert peak < 3 * READ_CHUNK


def test_a_lying_docx_is_left_out_and_the_rest_read(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    docx_bomb(docs / "lie.docx", megabytes=300, declared=4096)
    (docs / "notes.md").write_text("# Notes\n\nAcme Rockets was founded in 1999.\n")
    report: dict = {}
    start = time.monotonic()
    assert [d.doc_id for d in load_documents(docs, report)] == ["notes.md"]
    assert time.monotonic() - start < 30
    [line] = report["unreadable"]
    assert line.startswith(f"{docs / 'lie.docx'} is not a readable .docx file (")


@pytest.mark.slow
def test_index_leaves_a_docx_bomb_out_in_one_line_and_indexes_the_rest(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    docx_bomb(docs / "top.docx")
    (docs / "notes.md").write_text("# Notes\n\nAcme Rockets was founded by Jane Roe in 1999.\n")
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "program", "index", str(docs), "--out", str(tmp_path / "ix"),
                          "--no-adapt"], cwd=ROOT, env=program_env(tmp_path / "cache"), capture_output=True,
                         text=True, timeout=300)  # before the checks: over 500 s at 100 % CPU
    elapsed = time.monotonic() - start
    assert run.returncode == 0, run.stderr
    assert elapsed < 90  # the embedder's load, mostly (14 s on 2 shared cores)
    notes = [line for line in run.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: left out: {docs / 'top.docx'}: word/document.xml inflates to 300.0 MB, over the 100.0 MB "
                     "cap for one member of an Office file (raise CRAG_MAX_INFLATED_BYTES if it is meant)",
                     f"note: 1 file(s) left out of {docs}; the rest was read"]
    assert run.stdout.splitlines()[0].startswith(f"indexed 1 chunks from {docs} into {tmp_path / 'ix'}")
