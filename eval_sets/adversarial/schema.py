"""Row-level rules of the adversarial set: vocabularies, the schema of each file (its fields, which of
them are a Signature's inputs and which its labels), and ``check_row``. A new kind of row is one entry
in ``SCHEMAS``, ``INPUTS``, ``LABELS`` and ``LABEL_FIELD`` here, and its JSONL file.

``validate.py`` reads the files and the knowledge base and calls ``check_row`` on every row.
"""

from __future__ import annotations

SPLITS = ("train", "dev", "test")
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
    "plain",
    "vocabulary-mismatch",
    "silent-irrelevance",
    "stale-vs-current",
    "not-covered",
    "ambiguous",
    "shared-name",
    "multi-part",
    "prompt-injection",
    "chit-chat",
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
        {"must_not_contain": STRS, "relevant_chunk_ids": STRS, "needs_retrieval": BOOL,
         "pages": INTS, "where": STR, "evidence": STR},
    ),
}
KINDS = tuple(SCHEMAS)

#: kind -> input field names given to ``dspy.Example.with_inputs``
INPUTS: dict[str, tuple[str, ...]] = {
    "grading": ("question", "passage"),
    "strips": ("question", "strips"),
    "rewrite": ("question",),
    "support": ("claim", "evidence"),
    "answers": ("question", "context"),
    "queries": ("question",),
}

#: kind -> the label fields a metric compares against
LABELS: dict[str, tuple[str, ...]] = {
    "grading": ("reason", "relevance"),
    "strips": ("relevant",),
    "rewrite": ("expert_terms", "relevant_doc_ids"),
    "support": ("support",),
    "answers": ("gold_answers", "key_facts"),
    "queries": (
        "category",
        "expected_action",
        "relevant_doc_ids",
        "answerable",
        "gold_answers",
        "key_facts",
        "expert_terms",
    ),
}

#: kind -> the field whose values are counted as "labels" in the report
LABEL_FIELD = {
    "grading": "reason",
    "strips": None,  # counted as empty / non-empty
    "rewrite": "source",
    "support": "support",
    "answers": "case",
    "queries": "category",
}


def type_ok(value, kind: str) -> bool:
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


def _check_keys(kind: str, row: dict, where: str, report) -> None:
    """Add the row's schema problems: missing, mistyped and unknown keys, and its split."""
    required, optional = SCHEMAS[kind]
    for key, typ in required.items():
        if key not in row:
            report.add(where, f"missing key {key!r}")
        elif not type_ok(row[key], typ):
            report.add(where, f"{key!r} must be {typ} (non-empty strings), got {row[key]!r:.80}")
    for key, typ in optional.items():
        if key in row and not type_ok(row[key], typ):
            report.add(where, f"{key!r} must be {typ}, got {row[key]!r:.80}")
    unknown = set(row) - set(required) - set(optional)
    if unknown:
        report.add(where, f"unknown keys {sorted(unknown)}")
    if "split" in row and row["split"] not in SPLITS:
        report.add(where, f"split must be one of {SPLITS}, got {row['split']!r}")


def _check_kb_docs(ids: list[str], where: str, report, kb_ids: set[str]) -> None:
    """Add a problem for each relevant_doc_id that names no file of the knowledge base."""
    for doc_id in ids:
        if doc_id not in kb_ids:
            report.add(where, f"relevant_doc_id {doc_id!r} names no file in kb/ ({doc_id}.md)")


def _check_grading(row: dict, where: str, report) -> None:
    """Add a grading row's problems: its reason, and its relevance within the reason's band."""
    reason, rel = row.get("reason"), row.get("relevance")
    if reason not in REASONS:
        report.add(where, f"reason must be one of {REASONS}, got {reason!r}")
    elif type_ok(rel, NUM):
        lo, hi = RELEVANCE_BANDS[reason]
        if not lo <= rel <= hi:
            report.add(where, f"relevance {rel} outside the band {lo}-{hi} for reason {reason!r}")


def _check_strips(row: dict, where: str, report) -> None:
    """Add a strip row's problems: the number of strips, and its relevant strip numbers."""
    strips, relevant = row.get("strips"), row.get("relevant")
    if type_ok(strips, STRS) and not 3 <= len(strips) <= 6:
        report.add(where, f"strips must hold 3-6 strips, got {len(strips)}")
    if type_ok(strips, STRS) and type_ok(relevant, INTS):
        for n in relevant:
            if not 1 <= n <= len(strips):
                report.add(where, f"strip number {n} out of range 1..{len(strips)} (numbers are 1-based)")
        if len(set(relevant)) != len(relevant):
            report.add(where, "relevant has duplicate strip numbers")


def _check_rewrite(row: dict, where: str, report, kb_ids: set[str], popqa_ids: set[str] | None, own: str) -> None:
    """Add a rewrite row's problems: its source (``own`` or popqa), expert terms and relevant docs."""
    source = row.get("source", own)
    if source not in (own, "popqa"):
        report.add(where, f"source must be one of {(own, 'popqa')}, got {source!r}")
    terms = row.get("expert_terms")
    if type_ok(terms, STRS):
        if not terms:
            report.add(where, "expert_terms is empty")
        for t in terms:
            if t != t.lower():
                report.add(where, f"expert term {t!r} must be lowercase")
    ids = row.get("relevant_doc_ids")
    if type_ok(ids, STRS):
        if not ids:
            report.add(where, "relevant_doc_ids is empty")
        if source == "popqa":
            if popqa_ids is not None:
                for doc_id in ids:
                    if doc_id not in popqa_ids:
                        report.add(where, f"relevant_doc_id {doc_id!r} is not a PopQA knowledge-base doc_id")
        else:
            _check_kb_docs(ids, where, report, kb_ids)


def _check_answers(row: dict, where: str, report) -> None:
    """Add an answer row's problems: its numbered context strips and its gold answers."""
    context = row.get("context")
    if type_ok(context, STRS):
        if not context:
            report.add(where, "context is empty")
        for i, strip in enumerate(context, 1):
            if not strip.startswith(f"[{i}] "):
                report.add(where, f"context item {i} must start with '[{i}] ', got {strip[:20]!r}")
    if type_ok(row.get("gold_answers"), STRS) and not row["gold_answers"]:
        report.add(where, "gold_answers is empty")


def _check_query_docs(row: dict, ids: list[str], needs_retrieval, where: str, report, kb_ids: set[str],
                      chunk_ids: set[str] | None) -> None:
    """Add a query's problems with its relevant docs and chunks, given its answerability and retrieval need."""
    _check_kb_docs(ids, where, report, kb_ids)
    answerable = row.get("answerable")
    chunks = row.get("relevant_chunk_ids") or []
    for cid in chunks if chunk_ids is not None and type_ok(chunks, STRS) else []:
        if cid not in chunk_ids:
            report.add(where, f"relevant_chunk_id {cid!r} is not a chunk of kb/ (ids are <doc>#<n>)")
        elif cid.split("#")[0] not in ids:
            report.add(where, f"relevant_chunk_id {cid!r} is not in a relevant_doc_id")
    if answerable is True and ids and not chunks and "relevant_chunk_ids" in row:
        report.add(where, "answerable query with relevant_doc_ids but no relevant_chunk_ids")
    if needs_retrieval is False:
        if ids:
            report.add(where, "a query that needs no retrieval must have no relevant_doc_ids")
    elif answerable is True and not ids:
        report.add(where, "answerable query without relevant_doc_ids")
    if answerable is False and ids:
        report.add(where, "unanswerable query must have no relevant_doc_ids")
    if answerable is False and row.get("expected_action") != "incorrect":
        report.add(where, "unanswerable query must expect the 'incorrect' action")


def _check_query(row: dict, where: str, report, kb_ids: set[str], chunk_ids: set[str] | None) -> None:
    """Add a query row's problems: category, expected action, needs_retrieval, docs and chunks, answers, terms."""
    if row.get("category") not in CATEGORIES:
        report.add(where, f"category must be one of {CATEGORIES}, got {row.get('category')!r}")
    if row.get("expected_action") not in ACTIONS:
        report.add(where, f"expected_action must be one of {ACTIONS}, got {row.get('expected_action')!r}")
    needs_retrieval = row.get("needs_retrieval", True)  # absent means True
    if (row.get("category") == "chit-chat") == (needs_retrieval is True):
        report.add(where, "chit-chat queries, and only they, have needs_retrieval: false")
    ids = row.get("relevant_doc_ids")
    if type_ok(ids, STRS):
        _check_query_docs(row, ids, needs_retrieval, where, report, kb_ids, chunk_ids)
    if type_ok(row.get("gold_answers"), STRS) and not row["gold_answers"]:
        report.add(where, "gold_answers is empty")
    for t in row.get("expert_terms") or []:
        if isinstance(t, str) and t != t.lower():
            report.add(where, f"expert term {t!r} must be lowercase")


def check_row(kind: str, row: dict, where: str, report, kb_ids: set[str], popqa_ids: set[str] | None,
              chunk_ids: set[str] | None = None, source: str = "paylane"):
    """Add to ``report`` every problem of one row (``report.add(where, message)``).

    ``source`` is the domain's own source name (``paylane`` for the help centre, ``kubernetes``, ...):
    a rewrite row's ``source`` is it or ``popqa``."""
    _check_keys(kind, row, where, report)
    if kind == "grading":
        _check_grading(row, where, report)
    elif kind == "strips":
        _check_strips(row, where, report)
    elif kind == "rewrite":
        _check_rewrite(row, where, report, kb_ids, popqa_ids, source)
    elif kind == "support":
        if row.get("support") not in SUPPORT:
            report.add(where, f"support must be one of {SUPPORT}, got {row.get('support')!r}")
    elif kind == "answers":
        _check_answers(row, where, report)
    elif kind == "queries":
        _check_query(row, where, report, kb_ids, chunk_ids)
