"""Documents as teams keep them: PDF, Word, PowerPoint and spreadsheets, converted to Markdown.

The loader (``program.retrieval.corpus``) reads Markdown, text, HTML and JSONL itself; the files
here are converted first, so that the heading-aware chunker cuts them like any Markdown:

* ``.pdf``: pdfplumber (MIT) page by page: ruled tables as Markdown tables, two-column pages
  read column by column, lines set larger than the body as headings, repeated page headers and
  footers dropped (``furniture``), and a ``<!-- page N -->`` line before each page so that a
  chunk knows its page (``program.retrieval.chunking``).
* ``.docx``, ``.pptx``, ``.xlsx``, ``.csv``: Microsoft's markitdown (MIT): headings stay
  headings, tables Markdown tables, a slide or a sheet a section.

The converters are the optional extra ``documents`` (``pip install 'crag-dspy[documents]'``);
without it such a file is left out with one line naming it and that command.

Before a converter runs, :func:`check` refuses a file over ``max_file_bytes()`` and an Office
file whose zip directory declares more than ``archive.ArchiveLimits`` allow (a zip bomb: members
that inflate past 100 MiB one or 500 MiB all, 100-fold, 10,000 members), reading no member. The
corpus loader converts in a child process with a time limit (``formats.worker``, 600 s a file,
``CRAG_CONVERT_TIMEOUT``); :func:`convert` itself converts here, with no time limit.

Errors: :class:`DocumentError` (a ``CorpusError``), one line naming the file and the problem: a
missing converter, an encrypted, corrupt or empty file, a PDF without a text layer (a scan: no
OCR is run), a file over ``max_file_bytes()`` or over an Office file's limits. The loader leaves
that file out and reads the rest.
"""

from __future__ import annotations

from pathlib import Path

from program.env import env_bytes
from program.retrieval.errors import CorpusError
from program.retrieval.formats.archive import ARCHIVE_EXTS, check_archive
from program.retrieval.formats.base import (Converted, DocumentError, missing_converter,  # noqa: F401 - public here
                                           size_text)

PDF_EXTS = {".pdf"}
OFFICE_EXTS = {".docx", ".pptx", ".xlsx", ".csv"}
CONVERTED_EXTS = PDF_EXTS | OFFICE_EXTS
DEFAULT_MAX_FILE_BYTES = 200 * 2**20


def max_file_bytes() -> int:
    """The size cap of one PDF or Office file in bytes: ``$CRAG_MAX_FILE_BYTES``, else 200 MiB.
    (A 2,000-page PDF is a few tens of MB: a document, not an error.)"""
    try:
        return env_bytes("CRAG_MAX_FILE_BYTES", DEFAULT_MAX_FILE_BYTES)
    except ValueError as exc:
        raise CorpusError(str(exc)) from None


def check(path: Path) -> None:
    """Refuse the file at ``path`` (an extension of ``CONVERTED_EXTS``) before it is converted:
    unreadable, empty, over ``max_file_bytes()``, or an Office file over its zip limits
    (``archive.check_archive``). Reads the file's size and an Office file's zip directory only.

    Raises:
        DocumentError: see the module docstring.
        CorpusError: a size variable is set but not a whole number.
    """
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise DocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    if size == 0:
        raise DocumentError(f"{path} is empty (0 bytes)")
    cap = max_file_bytes()
    if size > cap:
        raise DocumentError(f"{path} is {size_text(size)}, over the {size_text(cap)} cap for one file "
                            "(raise CRAG_MAX_FILE_BYTES if it is meant)")
    if path.suffix.lower() in ARCHIVE_EXTS:
        check_archive(path)


def convert(path: Path, progress=None) -> Converted:
    """Convert the file at ``path`` (an extension of ``CONVERTED_EXTS``) to Markdown, in this
    process and with no time limit (``worker.ConvertWorker`` adds one), after :func:`check`.

    ``progress``: optional callback ``(pages_done, pages_total)`` for a long PDF.

    Raises:
        DocumentError: see the module docstring.
    """
    check(path)
    if path.suffix.lower() in PDF_EXTS:
        # lazy on purpose: pdfplumber loads only for a PDF
        from program.retrieval.formats.pdf import pdf_to_markdown

        return pdf_to_markdown(path, progress)
    # lazy on purpose: mammoth and markitdown load only for an Office file
    from program.retrieval.formats.office import office_to_markdown

    return office_to_markdown(path)
