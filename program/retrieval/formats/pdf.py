"""A PDF as Markdown, page by page, with pdfplumber (MIT; pdfminer.six underneath).

Per page: ruled tables become Markdown tables (cells apart, at their place on the page); a page
laid out in two columns (a clear gutter near the middle) is read left column, then right; lines
set at least ``HEADING_RATIO`` times the body's font size become headings (``#``, ``##``,
``###`` by size); lines close together are joined into a paragraph, a word hyphenated across a
line break joined again. Repeated headers and footers are dropped (``furniture``), and every
page starts with a ``<!-- page N -->`` line (``program.retrieval.chunking.PAGE_MARK``).

No OCR is run: a PDF with (almost) no text layer, or one whose fonts carry no Unicode map (its
text comes out as ``(cid:N)`` glyph numbers), is a :class:`DocumentError` naming the file.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

import numpy as np

from program.retrieval.formats.base import Converted, DocumentError, markdown_table, missing_converter
from program.retrieval.formats.furniture import drop_furniture

HEADING_RATIO = 1.2
# Fewer letters than this per page on average: a scan, not a text layer.
MIN_LETTERS_PER_PAGE = 40
# More unmapped glyphs than this share of words: the text layer is glyph numbers, not text.
MAX_CID_SHARE = 0.2
_CID = re.compile(r"\(cid:\d+\)")
_LEADER = re.compile(r"\s*(?:\.\s?){4,}\s*")  # a table of contents' dot leaders
_GAP = 0.6  # a vertical gap over this many line heights starts a new paragraph


def page_mark(n: int) -> str:
    """The line that starts page ``n`` (1-based) in the converted text."""
    return f"<!-- page {n} -->"


def pdf_to_markdown(path: Path, progress=None) -> Converted:
    """``path`` as Markdown (see the module docstring); ``progress(pages_done, pages_total)``.

    Raises:
        DocumentError: pdfplumber is not installed; the PDF is encrypted with a password,
            corrupt, or has no readable text layer.
    """
    try:
        # lazy on purpose: the optional extra; without it, one line naming the file and the install
        import pdfplumber
        from pdfminer.pdfdocument import PDFPasswordIncorrect
    except ImportError:
        raise missing_converter(path, "pdfplumber") from None
    try:
        pdf = pdfplumber.open(path)
        total = len(pdf.pages)
    except Exception as exc:  # pdfminer raises many kinds for a broken file
        if isinstance(exc, PDFPasswordIncorrect) or "PDFPasswordIncorrect" in _reason(exc):
            raise DocumentError(f"{path} is encrypted with a password; OCR and decryption are not run: decrypt it "
                                "first (e.g. qpdf --decrypt --password=PASSWORD in.pdf out.pdf)") from None
        raise DocumentError(f"{path} is not a readable PDF ({_reason(exc)})") from None
    logging.getLogger("pdfminer").setLevel(logging.ERROR)  # its per-object warnings are not the user's concern
    with pdf:
        title = str((pdf.metadata or {}).get("Title") or "").strip()
        pages = []
        for n, page in enumerate(pdf.pages, start=1):
            try:
                pages.append(_page_items(page))
            except Exception:  # a table or column cut pdfplumber refuses: the page's plain lines
                try:
                    pages.append(_plain_items(page))
                except Exception as exc:
                    raise DocumentError(f"{path}: page {n} cannot be read ({_reason(exc)})") from None
            page.close()  # frees the page's parsed objects: a 2,000-page PDF stays in memory bounds
            if progress is not None:
                progress(n, total)
    _check_text_layer(path, pages)
    text = _markdown(pages)
    if not _plausible_title(title):
        first = re.search(r"^#{1,3} (.+)$", text, flags=re.M)
        title = first.group(1).strip() if first else ""
    return Converted(text, title, total)


def _reason(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160] or type(exc).__name__


def _plausible_title(title: str) -> bool:
    # producers leave "Microsoft Word - draft3.doc" or a file name as the title
    return bool(title) and not re.search(r"(?i)microsoft word|\.docx?$|\.pdf$|^untitled", title)


def _columns(page) -> tuple[float, float] | None:
    """``(x, y)`` of a column gutter near the page's middle that runs from ``y`` to the foot of
    the page (above ``y``: a title or abstract across the page), or None for a one-column page."""
    w, h = page.width, page.height
    body = [c for c in page.chars if 0.05 * h < c["top"] < 0.95 * h and c["text"].strip()]
    if len(body) < 200:
        return None
    x0 = np.array([c["x0"] for c in body])
    x1 = np.array([c["x1"] for c in body])
    top = np.array([c["top"] for c in body])
    bottom = np.array([c["bottom"] for c in body])
    best = None
    for x in np.arange(0.35 * w, 0.65 * w, 1.0):
        crossing = (x0 <= x) & (x <= x1)
        y = float(bottom[crossing].max()) if crossing.any() else 0.0
        below = top > y
        left = len(set(np.round(top[below & (x1 < x)])))
        right = len(set(np.round(top[below & (x0 > x)])))
        if left >= 8 and right >= 8 and y < 0.5 * h:
            key = (y, abs(x - w / 2))
            if best is None or key < best[0]:
                best = (key, (float(x), y))
    return best[1] if best else None


def _page_items(page) -> list[tuple[str, str, float, float, float]]:
    """The page's items in reading order: ``(kind, text, font size, top, bottom)``, kind ``line`` or
    ``table`` (a table's text is Markdown, its size 0)."""
    tables = [(t.bbox, rows) for t in page.find_tables() if _shape_ok(rows := t.extract())]
    rest = page
    for bbox, _ in tables:
        rest = rest.outside_bbox(bbox, strict=False)
    gutter = _columns(rest)
    parts = [rest]
    if gutter is not None:
        (x, y), (x0, y0, x1, y1) = gutter, rest.bbox
        parts = [rest.within_bbox((x0, y0, x1, y0 + y), strict=False)] if y > 0 else []
        parts += [rest.within_bbox((x0, y0 + y, x0 + x, y1), strict=False),
                  rest.within_bbox((x0 + x, y0 + y, x1, y1), strict=False)]
    items = []
    for part in parts:
        for line in part.extract_text_lines(return_chars=True, x_tolerance=1.5):
            size = max((c.get("size", 0.0) for c in line["chars"]), default=0.0)
            items.append(("line", line["text"], round(size, 1), line["top"], line["bottom"]))
    for bbox, rows in tables:
        items.append(("table", markdown_table(rows), 0.0, bbox[1], bbox[3]))
    if gutter is None:
        items.sort(key=lambda it: it[3])
    else:  # the part across the top, then the columns in order; a table at its place by height
        lines = [it for it in items if it[0] == "line"]
        for table in (it for it in items if it[0] == "table"):
            at = next((i for i, it in enumerate(lines) if it[3] > table[3]), len(lines))
            lines.insert(at, table)
        items = lines
    return items


def _plain_items(page) -> list[tuple]:
    """The page's lines in reading order, without tables or columns (when cutting the page fails)."""
    return [("line", line["text"], round(max((c.get("size", 0.0) for c in line["chars"]), default=0.0), 1),
             line["top"], line["bottom"]) for line in page.extract_text_lines(return_chars=True, x_tolerance=1.5)]


def _shape_ok(rows: list[list]) -> bool:
    """A table of two rows and two columns at least (a single boxed cell is a frame, not a table)."""
    return len(rows) >= 2 and max((len(r) for r in rows), default=0) >= 2


def _check_text_layer(path: Path, pages: list) -> None:
    text = " ".join(it[1] for items in pages for it in items)
    cids = len(_CID.findall(text))
    letters = sum(ch.isalpha() for ch in _CID.sub("", text))
    if letters < MIN_LETTERS_PER_PAGE * max(1, len(pages)):
        raise DocumentError(f"{path} has no text layer ({len(pages)} page(s), {letters} letters: a scan?); "
                            "OCR is not run: make it searchable first (e.g. ocrmypdf) and index it again")
    if cids > MAX_CID_SHARE * max(1, len(text.split())):
        raise DocumentError(f"{path}: its fonts carry no Unicode map, so its text layer reads as glyph "
                            "numbers, not text; OCR is not run: make it searchable first (e.g. ocrmypdf)")


def _levels(pages: list) -> dict[float, int]:
    """Font size -> heading level (1-3) for sizes at least ``HEADING_RATIO`` times the body's."""
    weight = Counter()
    for items in pages:
        for kind, text, size, *_ in items:
            if kind == "line":
                weight[size] += len(text)
    if not weight:
        return {}
    body = weight.most_common(1)[0][0]
    big = sorted((s for s in weight if s >= HEADING_RATIO * body), reverse=True)
    return {s: min(i + 1, 3) for i, s in enumerate(big)}


def _joined(lines: list[str]) -> str:
    """One paragraph of ``lines``: dot leaders shortened, a leading ``#`` escaped (it is text, not a heading)."""
    out = ""
    for line in lines:
        line = " ".join(line.split())
        if out.endswith("-") and line[:1].islower() and out[-2:-1].isalpha():
            out = out[:-1] + line  # a word hyphenated across the line break
        else:
            out = f"{out} {line}" if out else line
    out = _LEADER.sub(" … ", out)
    return "\\" + out if out.startswith("#") else out


def _markdown(pages: list) -> str:
    levels = _levels(pages)
    texts = drop_furniture([[_CID.sub("", it[1]) for it in items] for items in pages])
    out = []
    for n, (items, kept) in enumerate(zip(pages, texts), start=1):
        out.append(page_mark(n))
        keep = Counter(kept)
        para: list[str] = []
        last_bottom = None
        for kind, raw, size, top, bottom in items:
            text = _CID.sub("", raw)
            if kind == "line":
                if not keep[text]:
                    continue  # furniture
                keep[text] -= 1
            heading = kind == "line" and size in levels and len(text.split()) <= 14
            gap = last_bottom is not None and top - last_bottom > _GAP * max(1.0, bottom - top)
            if para and (kind == "table" or heading or gap):
                out.append(_joined(para))
                para = []
            if kind == "table":
                out.append(text)
            elif heading:
                out.append("#" * levels[size] + " " + " ".join(text.split()))
            elif text.strip():
                para.append(text)
            last_bottom = bottom
        if para:
            out.append(_joined(para))
    return "\n\n".join(p for p in out if p.strip())
