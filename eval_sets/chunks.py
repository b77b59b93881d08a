"""Print the chunks the retriever cuts from a labeled domain's documents: ``python -m eval_sets.chunks KB_DIR``.

A labeling aid. Each chunk is printed as ``<doc>#<n>`` (the id that ``relevant_chunk_ids`` use), its
section heading and its text, under the default chunking of ``program.retrieval.chunking`` (the
retriever's own; it calls the same chunk ``<doc>.md#<n>``). With ``--ids`` only the ids are printed.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path


def kb_files(kb_dir: Path) -> list[Path]:
    """The documents of ``kb_dir``: Markdown files, and the PDF and Office files the loader converts."""
    from program.retrieval.formats import CONVERTED_EXTS

    return sorted(p for p in kb_dir.iterdir() if p.is_file() and p.suffix.lower() in {".md", *CONVERTED_EXTS})


@functools.lru_cache(maxsize=None)  # a PDF is read once per process, by the validator's two passes
def document_text(p: Path) -> str:
    """A document's text as the retriever reads it: a Markdown file as it is, a PDF or Office file
    converted (``program.retrieval.formats``; a PDF with its page marks)."""
    if p.suffix.lower() == ".md":
        return p.read_text(encoding="utf-8").replace("\r\n", "\n").strip()
    from program.retrieval.formats import convert

    return convert(p).text


def kb_chunks(kb_dir: Path, doc_ids: list[str] | None = None) -> list[tuple[str, str, str]]:
    """``(chunk_id, heading, text)`` for every chunk of the documents in ``kb_dir`` (or of ``doc_ids``).

    Raises FileNotFoundError naming a doc id with no document in ``kb_dir``."""
    from program.retrieval.chunking import chunk_document
    from program.retrieval.corpus import Document

    files = {p.stem: p for p in kb_files(kb_dir)}
    paths = list(files.values()) if not doc_ids else [files.get(d, kb_dir / f"{d}.md") for d in doc_ids]
    out = []
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"{p}: no such document")
        for c in chunk_document(Document(p.stem, document_text(p), p.stem, str(p))):
            out.append((c.chunk_id, c.heading, c.text))
    return out


def kb_chunk_pages(kb_dir: Path) -> dict[str, int]:
    """``{<doc>#<n>: page}`` for every chunk of a PDF in ``kb_dir`` (others have page 0)."""
    from program.retrieval.chunking import chunk_document
    from program.retrieval.corpus import Document

    return {c.chunk_id: c.page for p in kb_files(kb_dir)
            for c in chunk_document(Document(p.stem, document_text(p), p.stem, str(p)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m eval_sets.chunks", description=__doc__.splitlines()[0])
    parser.add_argument("kb_dir", type=Path, help="a folder of Markdown documents (a domain's kb/)")
    parser.add_argument("docs", nargs="*", help="doc ids (file stems); all documents when omitted")
    parser.add_argument("--ids", action="store_true", help="print the chunk ids only")
    args = parser.parse_args(argv)
    try:
        chunks = kb_chunks(args.kb_dir, args.docs)
    except FileNotFoundError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for chunk_id, heading, text in chunks:
        if args.ids:
            print(chunk_id)
        else:
            print(f"=== {chunk_id}  [{heading}]\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
