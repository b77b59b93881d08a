"""Re-indexing after a small change against a full build: seconds, and the same index.

    python -m experiments.bench_incremental --corpus owasp            # the 32 OWASP releases (PDF, Word, ...)
    python -m experiments.bench_incremental --corpus manual           # R's 2,415-page manual + ten small files
    python -m experiments.bench_incremental --corpus owasp --out reports/incremental-index/owasp

The corpus is copied to a temporary folder and indexed from scratch with ``python -m program
index DIR --out IDX --no-adapt`` (a process, as a user runs it: its start-up included). Then, one
after another, each of three changes is made and ``index`` run again, timed the same way:

* *changed*: one file edited (``owasp``: a paragraph added to the smallest Word file, inside its
  ``word/document.xml``; ``manual``: a line added to one of the small Markdown files);
* *added*: a new Markdown file;
* *deleted*: one file removed (``owasp``: a PDF; ``manual``: a small file).

After each change the same corpus is also built from scratch into another folder (in this
process, ``KnowledgeBase.build(force=True)``), and the two indexes are compared: the chunk ids in
order, the largest difference between their vectors, and the top 5 of hybrid search for every
question of the corpus's question set (``owasp``: its ``queries.jsonl``; ``manual``: the first
chunk heading of each of 200 sections). The goal: each change re-indexed in at most 5 % of the
full build's wall time, with the same search results. Writes ``summary.json`` under ``--out``
and prints a Markdown table. Run it alone: the figures are wall times on 2 cores.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np

from experiments.transfer import write_summary

ROOT = Path(__file__).resolve().parent.parent
OWASP = ROOT / "eval_sets" / "owasp" / "kb"
MANUAL = Path("/usr/share/R/doc/manual/fullrefman.pdf")  # Debian's r-doc-pdf
SMALL = ROOT / "eval_sets" / "kubernetes" / "kb"  # ten small Markdown files beside the manual
PARAGRAPH = ("Teams review this document every quarter; the next review adds the changes agreed at the "
             "spring meeting.")


def _corpus(kind: str, folder: Path) -> tuple[Path, list[str]]:
    """Copy the corpus into ``folder``; return it and its questions."""
    folder.mkdir(parents=True)
    if kind == "owasp":
        for f in sorted(OWASP.iterdir()):
            shutil.copy(f, folder / f.name)
        questions = [json.loads(line)["question"] for line in (ROOT / "eval_sets" / "owasp" / "queries.jsonl")
                     .read_text().splitlines() if line.strip()]
        return folder, questions
    if not MANUAL.is_file():
        raise SystemExit(f"{MANUAL} is missing: apt-get install r-doc-pdf")
    shutil.copy(MANUAL, folder / MANUAL.name)
    for f in sorted(SMALL.glob("*.md"))[:10]:
        shutil.copy(f, folder / f.name)
    return folder, []


def _edit_docx(path: Path) -> None:
    """Add ``PARAGRAPH`` as the first paragraph of a Word file's body, as an editor saves it."""
    with zipfile.ZipFile(path) as z:
        members = [(info, z.read(info.filename)) for info in z.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as out:
        for info, data in members:
            if info.filename == "word/document.xml":
                text = data.decode("utf-8")
                at = text.index(">", text.index("<w:body")) + 1
                data = (text[:at] + f"<w:p><w:r><w:t>{PARAGRAPH}</w:t></w:r></w:p>" + text[at:]).encode("utf-8")
            out.writestr(info, data)
    path.write_bytes(buffer.getvalue())


def _changes(kind: str, folder: Path):
    """``(name, change)`` for the three changes, each a function of no argument."""
    if kind == "owasp":
        word = min(folder.glob("*.docx"), key=lambda p: p.stat().st_size)
        pdf = sorted(folder.glob("*.pdf"))[0]
        changed = ("changed", lambda: _edit_docx(word))
        deleted = ("deleted", lambda: pdf.unlink())
    else:
        small = sorted(folder.glob("*.md"))
        changed = ("changed", lambda: small[0].write_text(small[0].read_text() + f"\n\n{PARAGRAPH}\n"))
        deleted = ("deleted", lambda: small[-1].unlink())
    added = ("added", lambda: (folder / "zz-release-notes.md").write_text(f"# Release notes\n\n{PARAGRAPH}\n"))
    return [changed, added, deleted]


def _index(folder: Path, out: Path, state: Path) -> tuple[float, str]:
    """``python -m program index`` as a process: its wall time and first line."""
    env = {**os.environ, "CRAG_STATE_DIR": str(state), "CRAG_PROGRESS": "0"}
    started = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "program", "index", str(folder), "--out", str(out), "--no-adapt"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if run.returncode:
        raise SystemExit(f"index failed: {run.stderr[-1000:]}")
    return seconds, run.stdout.splitlines()[0]


def compare(incremental, full, questions: list[str], k: int = 5) -> dict:
    """Whether two knowledge bases are the same index: chunk ids, vectors, search results."""
    from program.retrieval.faiss_index import stored_vectors

    same_ids = [c.chunk_id for c in incremental.chunks] == [c.chunk_id for c in full.chunks]
    diff = float(np.abs(stored_vectors(incremental._index) - stored_vectors(full._index)).max()) if same_ids else None
    ours, theirs = incremental.search_batch(questions, k), full.search_batch(questions, k)
    same = sum([p.id for p in a] == [p.id for p in b] for a, b in zip(ours, theirs))
    return {"same_chunk_ids": same_ids, "chunks": len(full), "max_vector_difference": diff,
            "questions": len(questions), "same_top_k": same, "k": k}


def run(kind: str, log=print) -> dict:
    """The benchmark on one corpus (see the module docstring); its summary."""
    from program.retrieval import KnowledgeBase

    with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
        tmp = Path(tmp)
        folder, questions = _corpus(kind, tmp / "docs")
        out, state = tmp / "index", tmp / "state"
        full_seconds, line = _index(folder, out, state)
        log(f"full build: {full_seconds:.1f} s: {line}")
        if not questions:  # the manual: a question per section, its heading
            kb = KnowledgeBase.load(out)
            questions = list(dict.fromkeys(c.heading for c in kb.chunks if len(c.heading.split()) >= 2))[:200]
        rows = []
        for name, change in _changes(kind, folder):
            change()
            seconds, line = _index(folder, out, state)
            started = time.perf_counter()
            full = KnowledgeBase.build(folder, tmp / f"full-{name}", force=True)
            rebuild = time.perf_counter() - started
            same = compare(KnowledgeBase.load(out), full, questions)
            rows.append({"change": name, "seconds": round(seconds, 1),
                         "share_of_full": round(seconds / full_seconds, 4),
                         "full_rebuild_in_process_seconds": round(rebuild, 1), "index_line": line, **same})
            log(f"{name}: {seconds:.1f} s ({seconds / full_seconds:.1%} of the full build): {line}; "
                f"top {same['k']} the same for {same['same_top_k']} of {same['questions']} questions")
    return {"corpus": kind, "full_build_seconds": round(full_seconds, 1), "changes": rows}


def table(summary: dict) -> str:
    """The summary as a Markdown table."""
    lines = ["| change | index (s) | share of the full build | same chunk ids | max vector difference | same top 5 |",
             "|---|---|---|---|---|---|",
             f"| full build | {summary['full_build_seconds']} | 100 % | | | |"]
    for r in summary["changes"]:
        diff = "-" if r["max_vector_difference"] is None else f"{r['max_vector_difference']:.1e}"
        lines.append(f"| {r['change']} | {r['seconds']} | {r['share_of_full']:.1%} | {r['same_chunk_ids']} | {diff} | "
                     f"{r['same_top_k']} of {r['questions']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("owasp", "manual"), default="owasp")
    parser.add_argument("--out", help="folder for summary.json (default: print only)")
    args = parser.parse_args(argv)
    summary = run(args.corpus)
    print(table(summary))
    if args.out:
        write_summary(summary, Path(args.out), {"arguments": list(argv or sys.argv[1:])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
