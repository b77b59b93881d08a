"""Check the adversarial set and print its counts: ``python -m eval_sets.adversarial.validate [DIR]``.

Checks, for every labeled file (grading, strips, rewrite, support, answers, queries), with the row rules
of ``schema.py``:

* each line is a JSON object with exactly the known keys: the required ones, of the right types,
  plus the optional ones where allowed (``source``, ``must_not_contain``, ``case``,
  ``relevant_chunk_ids``, ``needs_retrieval``);
* ``split`` is ``train``, ``dev`` or ``test``; label values are in their vocabularies; a grading row's
  ``relevance`` lies in the band of its ``reason``; strip numbers are 1-based, unique and in range;
  answer contexts are numbered ``[1]``, ``[2]``, ... in order; expert terms are lowercase;
  only ``chit-chat`` queries have ``needs_retrieval: false`` (absent means true);
* ids are unique across all files;
* references resolve: every Paylane ``relevant_doc_id`` names a file in ``kb/`` (``DIR/kb``); every
  ``relevant_chunk_id`` (``<doc>#<n>``, the retriever's chunk ``<doc>.md#<n>`` under the default
  chunking of ``program.retrieval.chunking``) is a chunk of one of the row's relevant docs; PopQA
  doc ids of rewrite rows (``source: popqa``) name a document of ``eval_sets/popqa/knowledge_base.jsonl``;
* labels against the documents: an answerable query's relevant chunks (heading and text) state at
  least one of its gold answers; in the newer domains (``eval_sets.domains``), every strip and every
  support evidence is copied verbatim from a ``kb/`` document;
* the knowledge base: 60-100 Markdown docs, each with a ``# `` heading and 150-500 words (other
  domains: their own bounds, ``python -m eval_sets.validate NAME``).

Prints counts per file, per split and per label/category, and a label-balance summary.
Exits 1 listing every problem found.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

from eval_sets.chunks import document_text, kb_files

from eval_sets.adversarial.schema import (  # noqa: F401  (re-exported: the vocabularies live in schema.py)
    ACTIONS, CATEGORIES, KINDS, LABEL_FIELD, REASONS, RELEVANCE_BANDS, SCHEMAS, SPLITS, SUPPORT, check_row,
)

DEFAULT_DIR = Path(__file__).resolve().parent
POPQA_KB = DEFAULT_DIR.parent / "popqa" / "knowledge_base.jsonl"
KB_DOCS = (60, 100)
KB_WORDS = (150, 500)



class Report:
    """Problems found, rows read per kind, and the knowledge base's doc and chunk ids."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.rows: dict[str, list[dict]] = {}
        self.kb_docs: list[str] = []
        self.chunk_ids: set[str] = set()
        self.chunk_text: dict[str, str] = {}
        self.doc_text: dict[str, str] = {}
        self.converted: set[str] = set()  # doc ids read from a PDF or Office file
        self.extraction_misses: list[str] = []  # answerable rows whose gold the converted text lost

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")


def _load_popqa_ids(path: Path) -> set[str] | None:
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as f:
        return {json.loads(line)["doc_id"] for line in f if line.strip()}


def kb_chunk_ids(kb_dir: Path) -> set[str]:
    """``<doc>#<n>`` for every chunk the retriever makes of ``kb_dir`` with its default settings."""
    return set(kb_chunk_texts(kb_dir))


def kb_chunk_texts(kb_dir: Path) -> dict[str, str]:
    """``{<doc>#<n>: heading and text}`` for every chunk the retriever makes of ``kb_dir`` with its
    default settings (a section's heading can state the answer: "Tidepool Apps (Sydney, AU)")."""
    from eval_sets.chunks import kb_chunks

    return {chunk_id: f"{heading}\n{text}" for chunk_id, heading, text in kb_chunks(kb_dir)}


def normalise(text: str) -> str:
    """Text as the label checks compare it: casefolded, Markdown ``*``, ``_`` and backticks dropped,
    whitespace collapsed."""
    return " ".join(re.sub(r"[*_`]", "", text).casefold().split())


def check_labels_against_documents(kind: str, row: dict, where: str, report: "Report", verbatim: bool) -> None:
    """The checks that read the documents: an answerable query's gold answers are stated by one of
    its relevant chunks (at least one of them, verbatim after ``normalise``); with ``verbatim``,
    every strip and every support evidence is copied from a knowledge-base document."""
    if kind == "queries" and row.get("answerable") is True and row.get("relevant_chunk_ids"):
        texts = [normalise(report.chunk_text[c]) for c in row["relevant_chunk_ids"] if c in report.chunk_text]
        gold = [g for g in row.get("gold_answers") or [] if isinstance(g, str)]
        if texts and gold and not any(normalise(g) in t for g in gold for t in texts):
            if set(row.get("relevant_doc_ids") or []) <= report.converted:
                # the label is the published document's; its converted text lost the answer: counted, not refused
                report.extraction_misses.append(where)
            else:
                report.add(where, f"no relevant chunk states a gold answer (gold {gold[:3]!r:.80}, "
                                  f"chunks {row['relevant_chunk_ids']})")
    if not verbatim:
        return
    corpus = report.doc_text
    pieces = row.get("strips") if kind == "strips" else [row.get("evidence")] if kind == "support" else []
    for piece in pieces or []:
        if isinstance(piece, str) and piece.strip() and not any(normalise(piece) in d for d in corpus.values()):
            report.add(where, f"text not found in any kb/ document (copy it verbatim): {piece!r:.80}")


def _check_kb(kb_dir: Path, report: Report, kb_docs=KB_DOCS, kb_words=KB_WORDS) -> set[str]:
    if not kb_dir.is_dir():
        report.add(str(kb_dir), "knowledge-base folder is missing")
        return set()
    docs = kb_files(kb_dir)
    report.kb_docs = [p.stem for p in docs]
    if not kb_docs[0] <= len(docs) <= kb_docs[1]:
        report.add(str(kb_dir), f"expected {kb_docs[0]}-{kb_docs[1]} docs, found {len(docs)}")
    for p in docs:
        text = document_text(p)
        words = len(text.split())
        if p.suffix == ".md" and not re.search(r"^# \S", text, flags=re.M):
            report.add(f"kb/{p.name}", "no '# ' heading")
        if not kb_words[0] <= words <= kb_words[1]:
            report.add(f"kb/{p.name}", f"{words} words, expected {kb_words[0]}-{kb_words[1]}")
        report.doc_text[p.stem] = normalise(text)
        if p.suffix != ".md":
            report.converted.add(p.stem)
    report.chunk_text = kb_chunk_texts(kb_dir)
    report.chunk_ids = set(report.chunk_text)
    return set(report.kb_docs)


def validate(directory: str | Path = DEFAULT_DIR, popqa_kb: str | Path | None = POPQA_KB, domain=None) -> Report:
    """Validate the set in ``directory`` (JSONL files beside a ``kb/`` folder); return a Report.

    ``domain``: an ``eval_sets.domains.Domain`` giving the files expected, the knowledge base's
    bounds, the source name and whether strips and evidence are verbatim; default the help centre's."""
    if domain is None:
        from eval_sets.domains import DOMAINS

        domain = DOMAINS["adversarial"]
    directory = Path(directory)
    report = Report()
    kb_ids = _check_kb(directory / "kb", report, domain.kb_docs, domain.kb_words)
    popqa_ids = _load_popqa_ids(Path(popqa_kb)) if popqa_kb else None
    seen: dict[str, str] = {}
    for kind in domain.kinds:
        path = directory / f"{kind}.jsonl"
        report.rows[kind] = []
        if not path.exists():
            report.add(path.name, "file is missing")
            continue
        with path.open(encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                where = f"{path.name}:{lineno}"
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    report.add(where, f"invalid JSON ({exc.msg})")
                    continue
                if not isinstance(row, dict):
                    report.add(where, "line is not a JSON object")
                    continue
                rid = row.get("id")
                if isinstance(rid, str):
                    where = f"{where} ({rid})"
                    if rid in seen:
                        report.add(where, f"duplicate id {rid!r} (first at {seen[rid]})")
                    else:
                        seen[rid] = f"{path.name}:{lineno}"
                check_row(kind, row, where, report, kb_ids, popqa_ids, report.chunk_ids, domain.source)
                check_labels_against_documents(kind, row, where, report, domain.verbatim)
                report.rows[kind].append(row)
    return report


def _label(kind: str, row: dict) -> str:
    if kind == "strips":
        return "none-relevant" if not row.get("relevant") else "some-relevant"
    return str(row.get(LABEL_FIELD[kind], "paylane" if kind == "rewrite" else "-"))


def _origin(row: dict) -> str:
    return str(row.get("source", "paylane")).split(":")[0]


def format_counts(report: Report) -> str:
    """Per-file, per-split and per-label counts, then a label-balance summary, as plain text."""
    lines = [f"kb/: {len(report.kb_docs)} docs, {len(report.chunk_ids)} chunks", ""]
    if report.converted:
        answerable = sum(1 for r in report.rows.get("queries", []) if r.get("answerable") is True)
        kept = answerable - len(report.extraction_misses)
        lines[-1:] = [f"answers that survive conversion: {kept} of {answerable} answerable queries"
                      + (f" (lost: {', '.join(report.extraction_misses)})" if report.extraction_misses else ""), ""]
    lines.append(f"{'file':<16}{'total':>6}{'train':>7}{'dev':>5}{'test':>6}   labels (train/dev/test)")
    total = Counter()
    for kind in [k for k in KINDS if k in report.rows]:
        rows = report.rows[kind]
        splits = Counter(r.get("split") for r in rows)
        total.update(splits)
        per_label: dict[str, Counter] = {}
        for r in rows:
            per_label.setdefault(_label(kind, r), Counter())[r.get("split")] += 1
        labels = ", ".join(f"{k} {c['train']}/{c['dev']}/{c['test']}" for k, c in sorted(per_label.items()))
        lines.append(f"{kind + '.jsonl':<16}{len(rows):>6}{splits['train']:>7}{splits['dev']:>5}{splits['test']:>6}"
                     f"   {labels}")
    component = sum(len(report.rows.get(k, [])) for k in KINDS if k != "queries")
    lines += ["", f"component examples (all but queries): {component}; all rows: {sum(total.values())} "
                  f"(train {total['train']}, dev {total['dev']}, test {total['test']})"]
    lines += ["", "label balance:"] + _balance(report)
    return "\n".join(lines)


def _balance(report: Report) -> list[str]:
    out = []
    strips = report.rows.get("strips", [])
    n = sum(len(r.get("strips") or []) for r in strips)
    rel = sum(len(r.get("relevant") or []) for r in strips)
    out.append(f"  strips: {rel}/{n} strips relevant ({rel / max(n, 1):.0%}); origin "
               + ", ".join(f"{k} {v}" for k, v in sorted(Counter(map(_origin, strips)).items())))
    support = report.rows.get("support", [])
    verdicts = Counter(r.get("support") for r in support)
    out.append("  support: " + ", ".join(f"{v} {verdicts[v]} ({verdicts[v] / max(len(support), 1):.0%})"
                                         for v in ("fully", "partially", "no"))
               + "; origin " + ", ".join(f"{k} {v}" for k, v in sorted(Counter(map(_origin, support)).items())))
    queries = report.rows.get("queries", [])
    if queries:
        actions = Counter(r.get("expected_action") for r in queries)
        out.append("  queries by expected_action: " + ", ".join(f"{a} {actions[a]}" for a in ACTIONS))
        answerable = Counter(bool(r.get("answerable")) for r in queries)
        retrieval = Counter(r.get("needs_retrieval", True) for r in queries)
        out.append(f"  queries answerable: {answerable[True]}, unanswerable: {answerable[False]}; "
                   f"needs_retrieval false: {retrieval[False]}")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1 or (args and args[0] in ("-h", "--help")):
        print(__doc__)
        return 0 if args and args[0] in ("-h", "--help") else 2
    directory = Path(args[0]) if args else DEFAULT_DIR
    report = validate(directory)
    print(format_counts(report))
    if not report.ok:
        print(f"\nINVALID: {len(report.problems)} problem(s) in {directory}:", file=sys.stderr)
        for problem in report.problems:
            print(f"  - {problem}", file=sys.stderr)
        return 1
    print("\nOK: the adversarial set is valid.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
