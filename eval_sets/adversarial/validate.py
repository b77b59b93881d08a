"""Check the adversarial set and print its counts: ``python -m eval_sets.adversarial.validate [DIR]``.

Checks, for every labeled file (grading, strips, rewrite, support, answers, queries):

* each line is a JSON object with exactly the known keys: the required ones, of the right types,
  plus optional ``source`` / ``must_not_contain`` / ``case`` where allowed;
* ``split`` is ``train`` or ``dev``; label values are in their vocabularies; a grading row's
  ``relevance`` lies in the band of its ``reason``; strip numbers are 1-based, unique and in
  range; answer contexts are numbered ``[1]``, ``[2]``, ... in order; expert terms are lowercase;
* ids are unique across all files;
* every Paylane ``relevant_doc_id`` names a file in ``kb/`` (``DIR/kb``); PopQA doc ids of
  rewrite rows (``source: popqa``) name a document of ``eval_sets/popqa/knowledge_base.jsonl``;
* the knowledge base: 18-25 Markdown docs, each with a ``# `` heading and 150-500 words.

Prints counts per file, per split and per label/category. Exits 1 listing every problem found.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

DEFAULT_DIR = Path(__file__).resolve().parent
POPQA_KB = DEFAULT_DIR.parent / "popqa" / "knowledge_base.jsonl"

SPLITS = ("train", "dev")
REASONS = ("irrelevant", "partial", "stale", "contradicts-other-source", "relevant")
#: the relevance band each grading reason must fall in (inclusive)
RELEVANCE_BANDS = {
    "relevant": (0.8, 1.0),
    "partial": (0.3, 0.59),
    "contradicts-other-source": (0.2, 0.5),
    "stale": (0.1, 0.3),
    "irrelevant": (0.0, 0.1),
}
SUPPORT = ("fully", "partially", "no")
ACTIONS = ("correct", "ambiguous", "incorrect")
CATEGORIES = (
    "vocabulary-mismatch",
    "silent-irrelevance",
    "stale-vs-current",
    "not-covered",
    "ambiguous",
    "shared-name",
    "multi-part",
    "prompt-injection",
)
REWRITE_SOURCES = ("paylane", "popqa")

STR, STRS, INTS, NUM, BOOL = "str", "list[str]", "list[int]", "number", "bool"

#: kind -> (required fields with types, optional fields with types)
SCHEMAS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "grading": (
        {"id": STR, "split": STR, "question": STR, "passage": STR, "reason": STR, "relevance": NUM, "source": STR},
        {},
    ),
    "strips": (
        {"id": STR, "split": STR, "question": STR, "strips": STRS, "relevant": INTS, "source": STR},
        {},
    ),
    "rewrite": (
        {"id": STR, "split": STR, "question": STR, "expert_terms": STRS, "relevant_doc_ids": STRS},
        {"source": STR},
    ),
    "support": (
        {"id": STR, "split": STR, "claim": STR, "evidence": STR, "support": STR},
        {"source": STR},
    ),
    "answers": (
        {"id": STR, "split": STR, "question": STR, "context": STRS, "gold_answers": STRS, "key_facts": STRS},
        {"must_not_contain": STRS, "case": STR, "source": STR},
    ),
    "queries": (
        {
            "id": STR,
            "split": STR,
            "question": STR,
            "category": STR,
            "expected_action": STR,
            "relevant_doc_ids": STRS,
            "answerable": BOOL,
            "gold_answers": STRS,
            "key_facts": STRS,
            "expert_terms": STRS,
        },
        {"must_not_contain": STRS},
    ),
}
KINDS = tuple(SCHEMAS)

#: kind -> the field whose values are counted as "labels" in the report
LABEL_FIELD = {
    "grading": "reason",
    "strips": None,  # counted as empty / non-empty
    "rewrite": "source",
    "support": "support",
    "answers": "case",
    "queries": "category",
}


def _type_ok(value, kind: str) -> bool:
    if kind == STR:
        return isinstance(value, str) and bool(value.strip())
    if kind == STRS:
        return isinstance(value, list) and all(isinstance(v, str) and v.strip() for v in value)
    if kind == INTS:
        return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    if kind == NUM:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == BOOL:
        return isinstance(value, bool)
    raise AssertionError(kind)


def _load_popqa_ids(path: Path) -> set[str] | None:
    if not path.exists():
        return None
    with path.open(encoding="utf-8") as f:
        return {json.loads(line)["doc_id"] for line in f if line.strip()}


class Report:
    """Problems found and rows read, per kind."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.rows: dict[str, list[dict]] = {}
        self.kb_docs: list[str] = []

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, where: str, message: str) -> None:
        self.problems.append(f"{where}: {message}")


def _check_row(kind: str, row: dict, where: str, report: Report, kb_ids: set[str], popqa_ids: set[str] | None):
    required, optional = SCHEMAS[kind]
    for key, typ in required.items():
        if key not in row:
            report.add(where, f"missing key {key!r}")
        elif not _type_ok(row[key], typ):
            report.add(where, f"{key!r} must be {typ} (non-empty strings), got {row[key]!r:.80}")
    for key, typ in optional.items():
        if key in row and not _type_ok(row[key], typ):
            report.add(where, f"{key!r} must be {typ}, got {row[key]!r:.80}")
    unknown = set(row) - set(required) - set(optional)
    if unknown:
        report.add(where, f"unknown keys {sorted(unknown)}")
    if "split" in row and row["split"] not in SPLITS:
        report.add(where, f"split must be one of {SPLITS}, got {row['split']!r}")

    def paylane_docs(ids):
        for doc_id in ids:
            if doc_id not in kb_ids:
                report.add(where, f"relevant_doc_id {doc_id!r} names no file in kb/ ({doc_id}.md)")

    if kind == "grading":
        reason, rel = row.get("reason"), row.get("relevance")
        if reason not in REASONS:
            report.add(where, f"reason must be one of {REASONS}, got {reason!r}")
        elif _type_ok(rel, NUM):
            lo, hi = RELEVANCE_BANDS[reason]
            if not lo <= rel <= hi:
                report.add(where, f"relevance {rel} outside the band {lo}-{hi} for reason {reason!r}")
    elif kind == "strips":
        strips, relevant = row.get("strips"), row.get("relevant")
        if _type_ok(strips, STRS) and not 3 <= len(strips) <= 6:
            report.add(where, f"strips must hold 3-6 strips, got {len(strips)}")
        if _type_ok(strips, STRS) and _type_ok(relevant, INTS):
            for n in relevant:
                if not 1 <= n <= len(strips):
                    report.add(where, f"strip number {n} out of range 1..{len(strips)} (numbers are 1-based)")
            if len(set(relevant)) != len(relevant):
                report.add(where, "relevant has duplicate strip numbers")
    elif kind == "rewrite":
        source = row.get("source", "paylane")
        if source not in REWRITE_SOURCES:
            report.add(where, f"source must be one of {REWRITE_SOURCES}, got {source!r}")
        terms = row.get("expert_terms")
        if _type_ok(terms, STRS):
            if not terms:
                report.add(where, "expert_terms is empty")
            for t in terms:
                if t != t.lower():
                    report.add(where, f"expert term {t!r} must be lowercase")
        ids = row.get("relevant_doc_ids")
        if _type_ok(ids, STRS):
            if not ids:
                report.add(where, "relevant_doc_ids is empty")
            if source == "popqa":
                if popqa_ids is not None:
                    for doc_id in ids:
                        if doc_id not in popqa_ids:
                            report.add(where, f"relevant_doc_id {doc_id!r} is not a PopQA knowledge-base doc_id")
            else:
                paylane_docs(ids)
    elif kind == "support":
        if row.get("support") not in SUPPORT:
            report.add(where, f"support must be one of {SUPPORT}, got {row.get('support')!r}")
    elif kind == "answers":
        context = row.get("context")
        if _type_ok(context, STRS):
            if not context:
                report.add(where, "context is empty")
            for i, strip in enumerate(context, 1):
                if not strip.startswith(f"[{i}] "):
                    report.add(where, f"context item {i} must start with '[{i}] ', got {strip[:20]!r}")
        if _type_ok(row.get("gold_answers"), STRS) and not row["gold_answers"]:
            report.add(where, "gold_answers is empty")
    elif kind == "queries":
        if row.get("category") not in CATEGORIES:
            report.add(where, f"category must be one of {CATEGORIES}, got {row.get('category')!r}")
        if row.get("expected_action") not in ACTIONS:
            report.add(where, f"expected_action must be one of {ACTIONS}, got {row.get('expected_action')!r}")
        ids = row.get("relevant_doc_ids")
        if _type_ok(ids, STRS):
            paylane_docs(ids)
            answerable = row.get("answerable")
            if answerable is True and not ids:
                report.add(where, "answerable query without relevant_doc_ids")
            if answerable is False and ids:
                report.add(where, "unanswerable query must have no relevant_doc_ids")
            if answerable is False and row.get("expected_action") != "incorrect":
                report.add(where, "unanswerable query must expect the 'incorrect' action")
        if _type_ok(row.get("gold_answers"), STRS) and not row["gold_answers"]:
            report.add(where, "gold_answers is empty")
        for t in row.get("expert_terms") or []:
            if isinstance(t, str) and t != t.lower():
                report.add(where, f"expert term {t!r} must be lowercase")


def _check_kb(kb_dir: Path, report: Report) -> set[str]:
    if not kb_dir.is_dir():
        report.add(str(kb_dir), "knowledge-base folder is missing")
        return set()
    docs = sorted(kb_dir.glob("*.md"))
    report.kb_docs = [p.stem for p in docs]
    if not 18 <= len(docs) <= 25:
        report.add(str(kb_dir), f"expected 18-25 Markdown docs, found {len(docs)}")
    for p in docs:
        text = p.read_text(encoding="utf-8")
        words = len(text.split())
        if not re.search(r"^# \S", text, flags=re.M):
            report.add(f"kb/{p.name}", "no '# ' heading")
        if not 150 <= words <= 500:
            report.add(f"kb/{p.name}", f"{words} words, expected 150-500")
    return set(report.kb_docs)


def validate(directory: str | Path = DEFAULT_DIR, popqa_kb: str | Path | None = POPQA_KB) -> Report:
    """Validate the set in ``directory`` (JSONL files beside a ``kb/`` folder); return a Report."""
    directory = Path(directory)
    report = Report()
    kb_ids = _check_kb(directory / "kb", report)
    popqa_ids = _load_popqa_ids(Path(popqa_kb)) if popqa_kb else None
    seen: dict[str, str] = {}
    for kind in KINDS:
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
                _check_row(kind, row, where, report, kb_ids, popqa_ids)
                report.rows[kind].append(row)
    return report


def _label(kind: str, row: dict) -> str:
    if kind == "strips":
        return "none-relevant" if not row.get("relevant") else "some-relevant"
    field = LABEL_FIELD[kind]
    return str(row.get(field, "paylane" if kind == "rewrite" else "-"))


def format_counts(report: Report) -> str:
    """The per-file, per-split and per-label counts as a plain-text table."""
    lines = [f"kb/: {len(report.kb_docs)} docs", ""]
    lines.append(f"{'file':<16}{'total':>6}{'train':>7}{'dev':>5}   labels (train/dev)")
    total = Counter()
    for kind in KINDS:
        rows = report.rows.get(kind, [])
        splits = Counter(r.get("split") for r in rows)
        total.update(splits)
        per_label: dict[str, Counter] = {}
        for r in rows:
            per_label.setdefault(_label(kind, r), Counter())[r.get("split")] += 1
        labels = ", ".join(f"{k} {c['train']}/{c['dev']}" for k, c in sorted(per_label.items()))
        lines.append(f"{kind + '.jsonl':<16}{len(rows):>6}{splits['train']:>7}{splits['dev']:>5}   {labels}")
    component = sum(len(report.rows.get(k, [])) for k in KINDS if k != "queries")
    lines.append("")
    lines.append(f"component examples (all but queries): {component}; all rows: {sum(total.values())} "
                 f"(train {total['train']}, dev {total['dev']})")
    queries = report.rows.get("queries", [])
    if queries:
        actions = Counter(r.get("expected_action") for r in queries)
        lines.append("queries by expected_action: " + ", ".join(f"{a} {actions[a]}" for a in ACTIONS))
        answerable = Counter(bool(r.get("answerable")) for r in queries)
        lines.append(f"queries answerable: {answerable[True]}, unanswerable: {answerable[False]}")
    return "\n".join(lines)


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
