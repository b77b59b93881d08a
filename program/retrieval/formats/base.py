"""What the converters share: the converted document, the error, the install hint."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from program.retrieval.errors import CorpusError

INSTALL_HINT = "pip install 'crag-dspy[documents]'"


class DocumentError(CorpusError):
    """One document file cannot be read; the message names it and why. The rest is indexed."""


@dataclass
class Converted:
    """A document file as Markdown.

    Attributes:
        text: Markdown; a PDF's pages each start with a ``<!-- page N -->`` line.
        title: the document's own title (PDF metadata, the first heading), "" if none.
        pages: the PDF's page count; 0 for other files.
    """

    text: str
    title: str = ""
    pages: int = 0


def size_text(n: int) -> str:
    """``n`` bytes as people read them: ``"300.0 MB"`` (MiB, from 1 MiB up), else ``"19.5 KB"``."""
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n / 2**10:.1f} KB"


def missing_converter(path: Path, module: str) -> DocumentError:
    """The error for ``path`` when the converter ``module`` is not installed."""
    return DocumentError(f"{path}: reading {path.suffix.lower()} files needs {module}: {INSTALL_HINT}")


def markdown_table(rows: list[list]) -> str:
    """A Markdown table of ``rows`` (the first is the header), each cell's whitespace collapsed and
    its ``|`` escaped, short rows padded, empty rows dropped; "" for no row."""
    cells = [[" ".join(str(c or "").split()).replace("|", "\\|") for c in r] for r in rows]
    cells = [r for r in cells if any(r)]
    if not cells:
        return ""
    width = max(len(r) for r in cells)
    cells = [r + [""] * (width - len(r)) for r in cells]
    lines = ["| " + " | ".join(cells[0]) + " |", "|" + "---|" * width]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells[1:]])
