"""Load a knowledge-base corpus from files into :class:`Document` objects.

Supported inputs (a single file, or a folder searched recursively in sorted path order):

* ``.jsonl`` — one JSON object per line. Text from ``text``, or ``paragraphs`` (a list of
  strings joined with blank lines), or ``content``; id from ``doc_id``, ``id`` or ``url``
  (else ``"<file stem>-<line number>"``); optional ``title`` and ``url``. Blank lines are skipped.
* ``.md`` / ``.markdown`` / ``.txt`` — the whole file is one document; id is the path relative
  to the folder (or the file name); title is the first ``# `` heading (Markdown) or the stem.
* ``.md`` files' YAML front matter (``---`` … ``---``) is metadata: its ``title`` is the title,
  and it is not indexed as text.
* ``.html`` / ``.htm`` — text extracted with BeautifulSoup (``formats.html``), dropping script,
  style, nav, header, footer (and similar) elements; block elements become paragraphs,
  ``<h1>``–``<h6>`` Markdown headings (so the chunker sees them), tables Markdown tables (cells
  apart); title from ``<title>``.
* ``.pdf``, ``.docx``, ``.pptx``, ``.xlsx``, ``.csv`` — converted to Markdown first
  (``program.retrieval.formats``: pdfplumber, markitdown; the optional extra ``documents``); a
  PDF's pages are marked so that each chunk knows its page. Such a file that cannot be read
  (no converter installed, encrypted, corrupt, empty, a scan without text, over
  ``CRAG_MAX_FILE_BYTES``, an Office file over its zip limits, a conversion over
  ``CRAG_CONVERT_TIMEOUT``: they run in a child process, ``formats.worker``) is left out with one
  line naming it and why (``report["unreadable"]``); the rest is read.

Every file must be UTF-8 text (a leading BOM is dropped): a file holding a NUL byte is refused
as binary, one with bytes that are not UTF-8 is refused with the offset of the first (convert it,
e.g. ``iconv -f latin1 -t utf-8``), rather than indexing replacement characters. One document
(a JSONL line, or a Markdown, text or HTML file) may hold at most ``max_document_bytes()``
bytes (10 MiB, ``$CRAG_MAX_DOCUMENT_BYTES``): a 50 MB line is a broken export, not a document.

Errors: :class:`CorpusError` (a ``ValueError``) whose one-line message names the file (and line)
and the problem: a missing path, a broken or looping symlink, an unreadable file, a binary or
non-UTF-8 file, a document over the size cap, a malformed JSONL line (1-based line number), a
duplicate document id, a single file with an unsupported extension, or a corpus with no
non-empty document (the message lists what was skipped and what could not be read). Unsupported files, unresolvable
symlinks, FIFOs, sockets and devices inside a folder are skipped (never opened), listed in the
optional ``report`` dict and by ``left_out``; a corpus path that is a FIFO is refused. Which
files a folder holds, and what it leaves out (links to files or folders outside it among them):
``program.retrieval.listing``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from program.env import env_bytes
from program.jsonl import JsonlError, LineTooLong, objects
from program.retrieval.errors import CorpusError
from program.retrieval.formats import CONVERTED_EXTS, DocumentError, convert
from program.retrieval.formats.html import html_to_text  # public here since the move
from program.retrieval.formats.markdown import markdown_title, split_front_matter
from program.retrieval.formats.worker import ConvertWorker
# public here since the move: which files a folder holds, and which it leaves out
from program.retrieval.listing import (HTML_EXTS, JSONL_EXTS, MARKDOWN_EXTS, SUPPORTED_EXTS,  # noqa: F401
                                       TEXT_EXTS, follows_outside_links, left_out, link_target,
                                       list_source_files, outside_links, skip_reason)

log = logging.getLogger(__name__)


DEFAULT_MAX_DOCUMENT_BYTES = 10 * 2**20


def max_document_bytes() -> int:
    """The size cap of one document in bytes: ``$CRAG_MAX_DOCUMENT_BYTES``, else 10 MiB."""
    try:
        return env_bytes("CRAG_MAX_DOCUMENT_BYTES", DEFAULT_MAX_DOCUMENT_BYTES)
    except ValueError as exc:
        raise CorpusError(str(exc)) from None


def _mb(n: int) -> str:
    return f"{n / 2**20:.1f} MB"


@dataclass
class Document:
    """One source document.

    Attributes:
        doc_id: unique id within the corpus (JSONL id, or path relative to the corpus folder).
        text: plain text; paragraphs separated by blank lines, headings as Markdown ``#`` lines.
        title: document title, may be empty.
        source_path: path of the file it was read from.
        url: the document's URL when known (JSONL ``url``), else empty.
        line: the 1-based JSONL line it came from; 0 for a whole-file document.
    """

    doc_id: str
    text: str
    title: str
    source_path: str
    url: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        """``path:line`` for a JSONL row, the path for a file."""
        return f"{self.source_path}:{self.line}" if self.line else self.source_path


def load_documents(path: str | Path, report: dict | None = None, progress=None,
                   page_progress=None) -> list[Document]:
    """Load every document under ``path`` (a file or a folder).

    Args:
        path: a supported file, or a folder searched recursively.
        report: optional dict, filled with ``files`` (count read), ``skipped_files`` (list of
            unsupported paths), ``empty_documents`` (count of documents with no text, dropped),
            ``unreadable`` (one line per PDF or Office file left out, naming it and why) and
            ``unreadable_files`` (file -> that line).
        progress: optional callback ``(files_done, files_total)``, called after each file.
        page_progress: optional callback ``(file name, pages_done, pages_total)`` within a PDF.

    Returns:
        Documents in deterministic order (sorted files, then line order).

    Raises:
        CorpusError: see the module docstring.
    """
    root = Path(path)
    files, skipped = list_source_files(root)
    if skipped:
        log.info("corpus %s: skipped %d unsupported file(s)", root, len(skipped))
    report = {} if report is None else report
    names = [_name(root, f) for f in files]
    docs = [d for per_file in read_documents(root, names, report, progress, page_progress).values() for d in per_file]
    unreadable, empty = report["unreadable"], report["empty_documents"]
    report.update(files=len(files), skipped_files=[str(s) for s in skipped])
    if not docs:
        raise empty_corpus(root, len(files), skipped, unreadable, empty)
    return docs


def empty_corpus(root: Path, files: int, skipped: list[Path], unreadable: list[str], empty: int) -> CorpusError:
    """The error for a corpus at ``root`` with no document with text: its ``files`` supported
    files, what was ``skipped`` and ``unreadable`` (the first three named), the ``empty`` documents."""
    shown = [f"{s.relative_to(root).as_posix()}: {skip_reason(s)}" for s in skipped] + list(unreadable)
    more = f"; {len(shown) - 3} more" if len(shown) > 3 else ""
    return CorpusError(f"empty corpus: no document with text under {root} "
                       f"({files} supported file(s), {len(skipped)} skipped, {len(unreadable)} unreadable, "
                       f"{empty} empty)" + (f"; left out {'; '.join(shown[:3])}{more}" if shown else ""))


def _name(root: Path, f: Path) -> str:
    """How the manifest names corpus file ``f``: its path under the folder ``root``, or its name."""
    return f.name if root.is_file() else f.relative_to(root).as_posix()


def read_documents(root: str | Path, names, report: dict | None = None, progress=None,
                   page_progress=None) -> dict[str, list[Document]]:
    """Read the corpus files ``names`` (as :func:`_name` gives them) of the corpus at ``root``.

    Returns file -> its documents with text, in the order of ``names`` (a file left out maps to
    ``[]``). ``report`` gets ``unreadable`` (one line per PDF or Office file left out),
    ``unreadable_files`` (file -> that line) and ``empty_documents``; ``progress`` and
    ``page_progress`` as in :func:`load_documents`.

    Raises:
        CorpusError: a file that cannot be read as text or JSONL (any file, when ``root`` is a
            single file), or a document id given twice among the files read.
    """
    root = Path(root)
    out: dict[str, list[Document]] = {}
    unreadable: dict[str, str] = {}
    empty = 0
    with ConvertWorker() as worker:  # PDF and Office files, in a child process with a time limit
        for n, name in enumerate(names, start=1):
            f = root if root.is_file() else root / name
            try:
                loaded = _load_file(f, name, page_progress, worker)
            except DocumentError as exc:  # one bad PDF or Word file: named, and the rest is read
                if root.is_file():
                    raise
                unreadable[name] = str(exc)
                loaded = []
            out[name] = [d for d in loaded if d.text.strip()]
            empty += len(loaded) - len(out[name])
            if progress is not None:
                progress(n, len(names))
    if report is not None:
        report.update(unreadable=list(unreadable.values()), unreadable_files=unreadable, empty_documents=empty)
    seen: dict[str, str] = {}
    for d in (d for docs in out.values() for d in docs):
        if d.doc_id in seen:
            raise CorpusError(f"duplicate document id {d.doc_id!r} at {d.where} (first seen at {seen[d.doc_id]})")
        seen[d.doc_id] = d.where
    return out


def check_document_ids(chunks) -> None:
    """Refuse a document id that two corpus files give (chunks in corpus-file order, each with
    ``doc_id`` and ``source_path``). Raises ``CorpusError`` naming both files."""
    first: dict[str, str] = {}
    for c in chunks:
        where = first.setdefault(c.doc_id, c.source_path)
        if where != c.source_path:
            raise CorpusError(f"duplicate document id {c.doc_id!r} at {c.source_path} (first seen at {where})")


def read_corpus_bytes(f: Path) -> bytes:
    """The bytes of corpus file ``f``; raises :class:`CorpusError` (one line) when it cannot be read."""
    try:
        return f.read_bytes()
    except OSError as exc:
        raise CorpusError(f"cannot read {f}: {exc.strerror or exc}") from None


def _read_text(f: Path, *, whole_file_is_one_document: bool) -> str:
    """``f`` decoded as UTF-8 (BOM dropped). Raises :class:`CorpusError` for an unreadable, binary,
    non-UTF-8 or (``whole_file_is_one_document``) oversized file."""
    cap = max_document_bytes()
    if whole_file_is_one_document:
        try:
            size = f.stat().st_size
        except OSError as exc:
            raise CorpusError(f"cannot read {f}: {exc.strerror or exc}") from None
        if size > cap:
            raise CorpusError(f"{f} is {_mb(size)}; one document may hold at most {_mb(cap)} "
                              f"(split it, or raise CRAG_MAX_DOCUMENT_BYTES)")
    data = read_corpus_bytes(f)
    nul = data.find(b"\0")
    if nul >= 0:
        raise CorpusError(f"{f} is a binary file, not text (NUL byte at offset {nul})")
    try:
        return data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise CorpusError(f"{f} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} (line {line}); "
                          f"convert it, e.g. iconv -f latin1 -t utf-8") from None


def _load_file(f: Path, rel: str, page_progress=None, worker: ConvertWorker | None = None) -> list[Document]:
    ext = f.suffix.lower()
    if ext in JSONL_EXTS:
        return _load_jsonl(f)
    if ext in CONVERTED_EXTS:
        pages = (lambda done, total: page_progress(rel, done, total)) if page_progress else None
        converted = worker.convert(f, pages) if worker is not None else convert(f, pages)
        return [Document(rel, converted.text, converted.title or f.stem, str(f))]
    text = _read_text(f, whole_file_is_one_document=True)
    if ext in HTML_EXTS:
        title, body = html_to_text(text)
        return [Document(rel, body, title or f.stem, str(f))]
    text = text.replace("\r\n", "\n").replace("\r", "\n").strip()
    if ext in MARKDOWN_EXTS:
        meta, text = split_front_matter(text)
        return [Document(rel, text.strip(), markdown_title(meta, text, f.stem), str(f))]
    return [Document(rel, text, f.stem, str(f))]


def _load_jsonl(f: Path) -> list[Document]:
    docs = []
    cap = max_document_bytes()
    try:
        rows = list(objects(f, _read_text(f, whole_file_is_one_document=False), max_line_bytes=cap))
    except LineTooLong as exc:
        raise CorpusError(f"line too long at {exc.where}: {_mb(exc.size)}; one document may hold "
                          f"at most {_mb(cap)} (raise CRAG_MAX_DOCUMENT_BYTES if it is meant)") from None
    except JsonlError as exc:
        raise CorpusError(f"malformed JSONL at {exc.where}: {exc.problem}") from None
    for lineno, row in rows:
        where = f"{f}:{lineno}"
        if isinstance(row.get("text"), str):
            text = row["text"]
        elif isinstance(row.get("paragraphs"), list):
            text = "\n\n".join(str(p).strip() for p in row["paragraphs"] if str(p).strip())
        elif isinstance(row.get("content"), str):
            text = row["content"]
        else:
            raise CorpusError(f"malformed JSONL at {where}: no text field "
                              f"('text' string, 'paragraphs' list or 'content' string)")
        doc_id = next((str(row[k]) for k in ("doc_id", "id", "url") if row.get(k) not in (None, "")),
                      f"{f.stem}-{lineno}")
        docs.append(Document(doc_id, text.strip(), str(row.get("title") or ""), str(f),
                             str(row.get("url") or ""), lineno))
    return docs
