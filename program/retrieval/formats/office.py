"""Word, PowerPoint, Excel and CSV files as Markdown: mammoth (BSD) and Microsoft's markitdown (MIT).

``.docx`` goes through mammoth to HTML, then ``formats.html`` (headings stay headings, tables
Markdown tables): markitdown's own Word path pre-processes the file and refused the OWASP Top 10
2017 release that mammoth reads. markitdown reads ``.pptx`` through python-pptx (a ``<!-- Slide number: N -->``
line and the slide's title as a
heading per slide, its tables and notes), ``.xlsx`` through pandas and openpyxl (a ``## sheet``
heading and a Markdown table per sheet) and ``.csv`` as one Markdown table. Images and their
alt text are left out: only text is indexed.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

from program.retrieval.formats.base import Converted, DocumentError, missing_converter

_IMAGE = re.compile(r"!\[[^\]]*\]\([^)]*\)")
_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$", flags=re.M)
_MARKITDOWN = {".pptx": "PptxConverter", ".xlsx": "XlsxConverter", ".csv": "CsvConverter"}


def office_to_markdown(path: Path) -> Converted:
    """``path`` (``.docx``, ``.pptx``, ``.xlsx`` or ``.csv``) as Markdown; its first ``#`` heading
    is the title.

    Raises:
        DocumentError: markitdown is not installed, or the file is corrupt or not of its kind.
    """
    if path.suffix.lower() == ".docx":
        title, text = _docx(path)
    else:
        title, text = _markitdown(path)
    text = _IMAGE.sub("", text).strip()
    if not text:
        raise DocumentError(f"{path} holds no text")
    if not title:
        found = _TITLE.search(text)
        title = found.group(1) if found else ""
    return Converted(text, title)


def _unreadable(path: Path, exc: Exception) -> DocumentError:
    attempts = getattr(exc, "attempts", None) or []  # markitdown keeps each converter's own error
    cause = next((a.exc_info[1] for a in attempts if getattr(a, "exc_info", None)), None) or exc.__cause__ or exc
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0][:160] or type(cause).__name__
    return DocumentError(f"{path} is not a readable {path.suffix.lower()} file ({reason})")


def _docx(path: Path) -> tuple[str, str]:
    try:
        # lazy on purpose: the optional extra; without it, one line naming the file and the install
        import mammoth
    except ImportError:
        raise missing_converter(path, "mammoth") from None
    # lazy on purpose: only Word files go through HTML
    from program.retrieval.formats.html import html_to_text

    try:
        with open(path, "rb") as fh:
            html = mammoth.convert_to_html(fh, convert_image=lambda image: {}).value
    except Exception as exc:  # a broken zip, a missing part
        raise _unreadable(path, exc) from None
    return html_to_text(html)


def _markitdown(path: Path) -> tuple[str, str]:
    try:
        # lazy on purpose: the optional extra; without it, one line naming the file and the install
        from markitdown import MarkItDown, converters
    except ImportError:
        raise missing_converter(path, "markitdown") from None
    # the file type's converter alone: with all of them, markitdown tries one after another, and its zip
    # converter inflates every member of an archive, nested archives too, past the checks of formats.archive
    reader = MarkItDown(enable_builtins=False, enable_plugins=False)
    reader.register_converter(getattr(converters, _MARKITDOWN[path.suffix.lower()])())
    try:
        with warnings.catch_warnings():  # openpyxl warns of every workbook extension it drops: not the user's concern
            warnings.simplefilter("ignore")
            result = reader.convert_local(str(path))
    except Exception as exc:  # each format's reader fails its own way
        raise _unreadable(path, exc) from None
    return str(result.title or "").strip(), result.text_content or ""
