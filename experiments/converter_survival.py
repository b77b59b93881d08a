"""Which PDF converter keeps the OWASP domain's answers: ``python -m experiments.converter_survival``.

Each converter reads the domain's 22 PDFs (``eval_sets/owasp/kb``); the Word, PowerPoint and
Excel files are read as committed (``program.retrieval.formats``) by every variant. The text is
cut by the retriever's chunker, and an answerable row counts when one of its gold answers (case,
whitespace and hyphenation normalised, as ``eval_sets/owasp/locate.py`` matches) stands in a chunk
of one of its relevant documents. Prints per converter: rows kept, seconds over the PDFs and
milliseconds per page (one process, one core), PDFs it could not read, and whether page and
table structure come out.

Converters: ``committed`` (pdfplumber as ``program.retrieval.formats.pdf`` drives it),
``markitdown`` (its own PDF path: pdfplumber with pdfminer.six as fallback), ``pypdf``
(``page.extract_text()`` per page) and ``pdfminer`` (``pdfminer.high_level.extract_text``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from eval_sets.owasp.locate import norm
from program.retrieval.chunking import chunk_document
from program.retrieval.corpus import Document
from program.retrieval.formats import convert

OWASP = Path(__file__).resolve().parents[1] / "eval_sets" / "owasp"


def committed(path: Path) -> str:
    return convert(path).text


def markitdown(path: Path) -> str:
    from markitdown import MarkItDown

    return MarkItDown().convert(str(path)).text_content


def pypdf(path: Path) -> str:
    from pypdf import PdfReader

    return "\n\n".join(f"<!-- page {i} -->\n\n{p.extract_text() or ''}"
                       for i, p in enumerate(PdfReader(path).pages, 1))


def pdfminer(path: Path) -> str:
    from pdfminer.high_level import extract_text

    return extract_text(str(path))


CONVERTERS = {"committed": committed, "markitdown": markitdown, "pypdf": pypdf, "pdfminer": pdfminer}


def pages(path: Path) -> int:
    from pypdf import PdfReader

    return len(PdfReader(path).pages)


def chunk_texts(doc_id: str, text: str) -> list[str]:
    """The normalised text (heading and body) of each chunk the retriever cuts from ``text``."""
    return [norm(f"{c.heading}\n{c.text}") for c in chunk_document(Document(doc_id, text, doc_id, doc_id))]


def measure(name: str, rows: list[dict], files: list[Path]) -> dict:
    """Rows kept, seconds, ms per page and failures for converter ``name`` over the PDFs of ``files``."""
    chunks, failed, seconds, page_count = {}, [], 0.0, 0
    for f in files:
        if f.suffix.lower() != ".pdf":
            chunks[f.stem] = chunk_texts(f.stem, committed(f))
            continue
        page_count += pages(f)
        start = time.perf_counter()
        try:
            text = CONVERTERS[name](f)
        except Exception as exc:  # a converter's own failure is a result here, not a crash
            failed.append(f"{f.name}: {type(exc).__name__}")
            text = ""
        seconds += time.perf_counter() - start
        chunks[f.stem] = chunk_texts(f.stem, text)
    answerable = [r for r in rows if r["answerable"]]
    kept = [r for r in answerable
            if any(norm(g) in t for g in r["gold_answers"] for d in r["relevant_doc_ids"] for t in chunks.get(d, []))]
    return {"converter": name, "kept": len(kept), "answerable": len(answerable), "seconds": round(seconds, 1),
            "ms_per_page": round(1000 * seconds / max(page_count, 1)), "pages": page_count, "failed": failed,
            "lost": sorted(r["id"] for r in answerable if r not in kept)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.converter_survival", description=__doc__.split("\n")[0])
    p.add_argument("--converters", nargs="*", default=list(CONVERTERS), choices=list(CONVERTERS))
    p.add_argument("--out", help="also write the results as JSON here")
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in (OWASP / "queries.jsonl").read_text(encoding="utf-8").splitlines() if line]
    files = sorted(f for f in (OWASP / "kb").iterdir() if f.suffix.lower() in {".pdf", ".docx", ".pptx", ".xlsx"})
    results = []
    print("| converter | answerable rows whose answer survives | PDFs not read | s over the PDFs | ms per page |")
    print("|---|---|---|---|---|")
    for name in args.converters:
        r = measure(name, rows, files)
        results.append(r)
        print(f"| {name} | {r['kept']} of {r['answerable']} ({100 * r['kept'] / r['answerable']:.1f} %) | "
              f"{len(r['failed'])} | {r['seconds']} | {r['ms_per_page']} |", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
