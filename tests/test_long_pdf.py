"""A 2,415-page PDF is a document, not an error: R's reference manual as Debian ships it
(``r-doc-pdf``, GPL-2, ``/usr/share/R/doc/manual/fullrefman.pdf``, 6.5 MB) is read page by page
with progress, under the size cap, and each chunk knows its page. CI installs the package
(``.ci/run``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from program.retrieval.chunking import chunk_document
from program.retrieval.corpus import load_documents
from program.retrieval.formats import max_file_bytes

MANUAL = Path("/usr/share/R/doc/manual/fullrefman.pdf")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not MANUAL.exists(), reason="needs Debian's r-doc-pdf (apt-get install r-doc-pdf)")]


def test_a_2415_page_manual_is_read_with_page_progress_and_pages_on_its_chunks():
    assert MANUAL.stat().st_size < max_file_bytes()
    seen = []
    report: dict = {}
    docs = load_documents(MANUAL, report, page_progress=lambda name, done, total: seen.append((name, done, total)))
    [manual] = docs
    assert report["unreadable"] == []
    ticks = [(done, total) for name, done, total in seen]
    assert {name for name, _, _ in seen} == {"fullrefman.pdf"}
    assert ticks[-1] == (2415, 2415) and len(ticks) >= 100  # progress as it reads, not once at the end
    chunks = chunk_document(manual)
    pages = {c.page for c in chunks}
    assert min(pages) == 1 and max(pages) == 2415 and len(pages) > 2300
    # cancor's references stand on the file's page 1501 (printed 1470); their chunk starts on 1500
    hotelling = [c for c in chunks if "Hotelling H. (1936)" in c.text]
    assert [c.page for c in hotelling] == [1500] and hotelling[0].where == "fullrefman.pdf p. 1500"
