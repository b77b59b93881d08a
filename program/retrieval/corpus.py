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
  ``CRAG_MAX_FILE_BYTES``) is left out with one line naming it and why (``report["unreadable"]``);
  the rest is read.

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
optional ``report`` dict and by ``left_out``; a corpus path that is a FIFO is refused.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from program.env import env_bytes
from program.retrieval.errors import CorpusError
from program.retrieval.formats import CONVERTED_EXTS, DocumentError, convert
from program.retrieval.formats.html import html_to_text  # noqa: F401 - public here since the move
from program.retrieval.formats.markdown import markdown_title, split_front_matter

log = logging.getLogger(__name__)

JSONL_EXTS = {".jsonl"}
MARKDOWN_EXTS = {".md", ".markdown"}
TEXT_EXTS = {".txt"}
HTML_EXTS = {".html", ".htm"}
SUPPORTED_EXTS = JSONL_EXTS | MARKDOWN_EXTS | TEXT_EXTS | HTML_EXTS | CONVERTED_EXTS


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


def list_source_files(path: str | Path) -> tuple[list[Path], list[Path]]:
    """Return ``(supported_files, skipped_files)`` under ``path``, each sorted.

    A single file with an unsupported extension raises :class:`CorpusError`;
    a missing path raises :class:`CorpusError`.
    """
    p = Path(path)
    if not p.exists():
        if p.is_symlink():
            raise CorpusError(f"corpus path {p} is a {_symlink_problem(p)}")
        raise CorpusError(f"{p}: no such file or folder")
    if not p.is_file() and not p.is_dir():  # a FIFO would block the read for ever
        raise CorpusError(f"corpus path {p} is {_special_kind(p)}")
    if p.is_file():
        if p.suffix.lower() not in SUPPORTED_EXTS:
            raise CorpusError(f"unsupported corpus file type {p.suffix!r}: {p} "
                              f"(supported: {', '.join(sorted(SUPPORTED_EXTS))})")
        return [p], []
    files, skipped = [], []
    follow = follows_outside_links()
    # everything but folders: FIFOs, sockets, devices and unresolvable symlinks are skipped, never opened
    for f in sorted(x for x in p.rglob("*") if not x.is_dir()):
        if any(part.startswith(".") for part in f.relative_to(p).parts):
            continue  # hidden files and folders (.git, editor swap files)
        readable = f.suffix.lower() in SUPPORTED_EXTS and f.is_file() and (follow or link_target(p, f) is None)
        (files if readable else skipped).append(f)
    return files, skipped


def follows_outside_links() -> bool:
    """True when ``CRAG_OUTSIDE_LINKS=follow``: a file in a knowledge-base folder that links outside
    it is read. By default it is left out (a ``passwd.txt -> /etc/passwd`` would be served to clients)."""
    value = os.environ.get("CRAG_OUTSIDE_LINKS", "").strip().lower()
    if value not in ("", "follow", "refuse"):
        raise CorpusError(f"CRAG_OUTSIDE_LINKS must be follow or refuse, got {value!r}")
    return value == "follow"


def link_target(root: Path, f: Path) -> Path | None:
    """Where ``f`` (under the folder ``root``) really is when a symlink takes it outside ``root``, else None."""
    try:
        target = f.resolve(strict=True)
    except (OSError, RuntimeError):
        return None  # a broken link or a loop: skipped for that (``_skip_reason``)
    return None if target.is_relative_to(root.resolve()) else target


def outside_links(path: str | Path) -> list[str]:
    """``"name -> target"`` for each file under the folder ``path`` that links outside it."""
    root = Path(path)
    if not root.is_dir():
        return []
    return [f"{f.relative_to(root).as_posix()} -> {target}" for f in sorted(root.rglob("*"))
            if not any(part.startswith(".") for part in f.relative_to(root).parts) and f.is_file()
            and (target := link_target(root, f)) is not None]


def _special_kind(p: Path) -> str:
    """What a path that is neither a regular file nor a folder is, e.g. ``"not a regular file (FIFO)"``."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "not a regular file"
    kinds = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"))
    kind = next((name for test, name in kinds if test(mode)), "")
    return f"not a regular file ({kind})" if kind else "not a regular file"


def _symlink_problem(p: Path) -> str:
    """``"symlink loop"`` or ``"broken symlink (to X)"`` for a symlink that does not resolve."""
    try:
        p.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop this way
        return "symlink loop"
    except OSError as exc:
        if getattr(exc, "errno", None) == 40:  # ELOOP
            return "symlink loop"
    return f"broken symlink (to {os.readlink(p)})"


def _skip_reason(f: Path) -> str:
    if f.is_symlink() and not f.exists():
        return _symlink_problem(f)
    if f.is_file() and f.suffix.lower() in SUPPORTED_EXTS:  # left out for where it leads
        return f"links outside the knowledge base (to {f.resolve()}); CRAG_OUTSIDE_LINKS=follow reads it"
    if not f.is_file():
        return _special_kind(f)
    return f"unsupported type {f.suffix or '(none)'}"


def left_out(path: str | Path) -> list[str]:
    """The files under the folder ``path`` the loader skips, one ``"name: why"`` each (``[]`` for a
    single file or a missing path): unsupported types, broken or looping symlinks, FIFOs, sockets,
    devices. Hidden files and folders are not listed."""
    root = Path(path)
    if not root.is_dir():
        return []
    return [f"{s.relative_to(root).as_posix()}: {_skip_reason(s)}" for s in list_source_files(root)[1]]


def load_documents(path: str | Path, report: dict | None = None, progress=None,
                   page_progress=None) -> list[Document]:
    """Load every document under ``path`` (a file or a folder).

    Args:
        path: a supported file, or a folder searched recursively.
        report: optional dict, filled with ``files`` (count read), ``skipped_files`` (list of
            unsupported paths), ``empty_documents`` (count of documents with no text, dropped),
            ``unreadable`` (one line per PDF or Office file left out, naming it and why).
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
    docs: list[Document] = []
    empty = 0
    unreadable: list[str] = []
    for n, f in enumerate(files, start=1):
        rel = f.name if root.is_file() else f.relative_to(root).as_posix()
        try:
            loaded = _load_file(f, rel, page_progress)
        except DocumentError as exc:  # one bad PDF or Word file: named, and the rest is read
            if root.is_file():
                raise
            unreadable.append(str(exc))
            loaded = []
        for doc in loaded:
            if doc.text.strip():
                docs.append(doc)
            else:
                empty += 1
        if progress is not None:
            progress(n, len(files))
    if report is not None:
        report.update(files=len(files), skipped_files=[str(s) for s in skipped], empty_documents=empty,
                      unreadable=unreadable)
    if not docs:
        shown = [f"{s.relative_to(root).as_posix()}: {_skip_reason(s)}" for s in skipped] + unreadable
        more = f"; {len(shown) - 3} more" if len(shown) > 3 else ""
        raise CorpusError(f"empty corpus: no document with text under {root} "
                          f"({len(files)} supported file(s), {len(skipped)} skipped, {len(unreadable)} unreadable, "
                          f"{empty} empty)" + (f"; left out {'; '.join(shown[:3])}{more}" if shown else ""))
    seen: dict[str, str] = {}
    for d in docs:
        if d.doc_id in seen:
            raise CorpusError(f"duplicate document id {d.doc_id!r} at {d.where} (first seen at {seen[d.doc_id]})")
        seen[d.doc_id] = d.where
    return docs


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


def _load_file(f: Path, rel: str, page_progress=None) -> list[Document]:
    ext = f.suffix.lower()
    if ext in JSONL_EXTS:
        return _load_jsonl(f)
    if ext in CONVERTED_EXTS:
        pages = (lambda done, total: page_progress(rel, done, total)) if page_progress else None
        converted = convert(f, pages)
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
    # split on newlines only: str.splitlines() would also cut at U+2028 inside a JSON string
    for lineno, line in enumerate(_read_text(f, whole_file_is_one_document=False).split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{f}:{lineno}"
        if len(line) > cap // 4 and len(line.encode("utf-8")) > cap:
            raise CorpusError(f"line too long at {where}: {_mb(len(line.encode('utf-8')))}; one document may hold "
                              f"at most {_mb(cap)} (raise CRAG_MAX_DOCUMENT_BYTES if it is meant)")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CorpusError(f"malformed JSONL at {where}: {exc.msg} (column {exc.colno})") from None
        if not isinstance(row, dict):
            raise CorpusError(f"malformed JSONL at {where}: expected an object, got {type(row).__name__}")
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
