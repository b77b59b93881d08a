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


def missing_converter(path: Path, module: str) -> DocumentError:
    """The error for ``path`` when the converter ``module`` is not installed."""
    return DocumentError(f"{path}: reading {path.suffix.lower()} files needs {module}: {INSTALL_HINT}")
