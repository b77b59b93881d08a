"""Evaluation sets as uniform rows, and the correctness rule for one answer.

* :func:`load_set`: ``popqa`` (long-tail PopQA, by the fixed train/dev split of
  ``eval_sets/popqa/split.json``) or a labeled domain (``adversarial``, the hand-labeled Paylane
  help centre; ``kubernetes``; ``handbook``: ``eval_sets.domains``), by split, as dicts with the
  same keys.
* :func:`sample_part`: the sampling rule (``docs/evaluation.md``): a split's *choose* sample,
  on which variants are chosen, and its *confirm* rest, on which a choice is confirmed.
* :func:`is_correct`: the CRAG paper's rule (a gold string in the answer, case-insensitive);
  an unanswerable row is correct when the program abstained.
"""

from __future__ import annotations

import random
import sys

from eval_sets.domains import DOMAINS
from eval_sets.domains import load_rows as load_domain_rows
from optimize.metrics import answer_correct
from program.stages.selfcheck import is_abstention
from program.types import FALLBACK_ANSWER

FALLBACK_TEXT = FALLBACK_ANSWER

PARTS = ("choose", "confirm")
# PopQA's choose sample is the first 100 of its dealt dev order: the 100 (``--limit 100``, seed
# 0) that every variant up to 2026-12-06 was chosen on
POPQA_CHOOSE = 100


def sample_part(name: str, rows: list[dict], part: str | None, seed: int) -> list[dict]:
    """The ``part`` of a split's ``rows`` (all of them, in the loader's order) the sampling rule names.

    ``choose``: PopQA's first ``POPQA_CHOOSE`` rows in its dealt order (spread over relations);
    a domain's seeded stratified half (:func:`stratified_sample`, ``len(rows) // 2``).
    ``confirm``: the split's other rows, in their order: no choice was made on them. None: ``rows``.

    Raises:
        ValueError: ``part`` is not ``choose``, ``confirm`` or None.
    """
    if part is None:
        return rows
    if part not in PARTS:
        raise ValueError(f"unknown sample part {part!r}: choose or confirm")
    choose = rows[:POPQA_CHOOSE] if name == "popqa" else stratified_sample(rows, max(1, len(rows) // 2), seed)
    if part == "choose":
        return choose
    chosen = {r["id"] for r in choose}
    return [r for r in rows if r["id"] not in chosen]


def load_set(name: str, limit: int | None, seed: int, split: str = "dev", part: str | None = None) -> list[dict]:
    """Load an evaluation set as uniform rows.

    Args:
        name: ``popqa`` or a labeled domain of ``eval_sets.domains`` (``adversarial``, the help
            centre; ``kubernetes``; ``handbook``).
        limit: number of rows; PopQA takes a seeded sample of ``split`` spread over its
            relations, a domain a seeded sample of ``split`` with each category in proportion
            to its share of the split (:func:`stratified_sample`). None: all.
        seed: sampling seed.
        split: ``dev`` (default: evaluation runs), ``train`` (analyses only: judges and prompts
            learn from it) or, for a domain, ``test``. PopQA has no ``test`` split.
        part: ``choose`` or ``confirm`` (:func:`sample_part`), taken before ``limit`` samples
            within it; None: the whole split.

    Returns:
        Dicts with ``id``, ``question``, ``relation`` (PopQA relation, or the adversarial
        row's ``category``/empty), ``gold`` (list[str]), ``expected_action`` (str or None),
        ``answerable`` (bool; always True on PopQA), ``needs_retrieval`` (bool; False only for
        the adversarial set's chit-chat rows).

    Raises:
        SystemExit(2): unknown set, a split the domain's loader rejects (ValueError from
            ``load_rows``), a domain whose queries file is missing, or a PopQA split other than
            ``train`` / ``dev``.
    """
    if name == "popqa":
        from eval_sets.popqa import SPLITS, load_questions

        if split not in SPLITS:
            print(f"error: --set popqa --split {split}: PopQA has only the splits {' and '.join(SPLITS)} "
                  "(eval_sets/popqa/split.json; evaluate on dev, learn from train)", file=sys.stderr)
            raise SystemExit(2)
        rows = [
            {"id": q["id"], "question": q["question"], "relation": q["relation"] or "",
             "gold": list(q["possible_answers"] or []), "expected_action": None, "answerable": True,
             "needs_retrieval": True}
            for q in load_questions(limit=None if part else limit, seed=seed, split=split)
        ]
        return sample_part(name, rows, part, seed)[:limit] if part else rows
    if name in DOMAINS:
        try:
            raw = load_domain_rows(name, "queries", split)
        except ValueError as exc:  # e.g. a split the set does not have
            print(f"error: --set {name} --split {split}: {exc}", file=sys.stderr)
            raise SystemExit(2) from exc
        except FileNotFoundError as exc:
            print(f"error: --set {name}: {exc.filename}: no such file", file=sys.stderr)
            raise SystemExit(2) from exc
        rows = [{
            "id": str(r.get("id") or f"{split}-{i:04d}"), "question": r["question"],
            "relation": str(r.get("category") or ""), "gold": list(r.get("gold_answers") or []),
            "expected_action": (str(r["expected_action"]).lower() if r.get("expected_action") else None),
            "answerable": bool(r.get("answerable", True)),
            "needs_retrieval": bool(r.get("needs_retrieval", True)),
        } for i, r in enumerate(raw)]
        rows = sample_part(name, rows, part, seed)
        return stratified_sample(rows, limit, seed) if limit else rows
    print(f"error: unknown --set {name!r} (popqa, {', '.join(sorted(DOMAINS))})", file=sys.stderr)
    raise SystemExit(2)


FOLLOWUP_FORMS = ("asked", "standalone")


def followup_rows(name: str, split: str, form: str) -> list[dict]:
    """The domain's follow-ups in ``split`` (``eval_sets/followups``) as ``load_set`` rows, graded
    by the labeled question each is built on: ``asked`` puts the follow-up as the question and its
    conversation in ``history``; ``standalone`` the standalone question written by hand, alone.

    Raises:
        SystemExit(2): ``name`` has no follow-ups, or ``form`` is neither form."""
    from eval_sets import followups

    rows = followups.load_rows(name, split)
    if not rows or form not in FOLLOWUP_FORMS:
        print(f"error: --followups {form} --set {name} --split {split}: no such follow-ups "
              f"({', '.join(FOLLOWUP_FORMS)}; eval_sets/followups)", file=sys.stderr)
        raise SystemExit(2)
    source = {r["id"]: r for r in load_set(name, None, 0, split)}
    out = []
    for row in rows:
        labeled = source[row["source_id"]]
        asked = form == "asked"
        out.append({**labeled, "id": row["id"], "question": row["followup"] if asked else row["standalone"],
                    "relation": row["kind"], **({"history": followups.history(row)} if asked else {})})
    return out


def demo_questions(compiled_dir) -> set[str]:
    """The questions the compiled prompts hold as few-shot demos (``crag.json``), case- and
    space-normalised; empty without a compiled state.

    A question whose answer stands in the prompt measures recall, not reading: the compile's
    demos come from training rows, but a PopQA question can be both an adversarial training
    row's and a PopQA dev question (``eval_sets/popqa/README.md``'s split rule), so evaluation
    leaves such questions out (``held_out``).
    """
    import json
    from pathlib import Path

    path = Path(compiled_dir) / "crag.json" if compiled_dir else None
    if path is None or not path.exists():
        return set()
    state = json.loads(path.read_text(encoding="utf-8"))
    return {" ".join(str(d["question"]).split()).casefold()
            for part in state.values() if isinstance(part, dict)
            for d in part.get("demos", []) if isinstance(d, dict) and d.get("question")}


def held_out(rows: list[dict], demos: set[str]) -> tuple[list[dict], list[dict]]:
    """``(kept, left_out)``: ``rows`` split by whether their question is one of ``demos``."""
    kept, out = [], []
    for row in rows:
        (out if " ".join(row["question"].split()).casefold() in demos else kept).append(row)
    return kept, out


def stratified_sample(rows: list[dict], limit: int, seed: int = 0, key: str = "relation") -> list[dict]:
    """A seeded sample of ``limit`` rows with every group of ``row[key]`` in proportion to its share.

    A domain's queries file is written category by category, so its first rows are one or two
    categories (the first 40 of a 125-row test split held only plain and vocabulary-mismatch
    questions, none unanswerable). Each group gets ``floor(limit * share)`` rows; the rows left
    go to the largest remainders (ties: a seeded order of the groups). Within a group the rows
    are a seeded shuffle; the sample keeps the file's order.

    Args:
        rows: the split's rows, in file order.
        limit: rows wanted (> 0); ``limit >= len(rows)`` returns ``rows`` unchanged.
        seed: same ``rows`` + ``limit`` + ``seed`` give the same sample.
        key: the field naming the group (``relation`` holds a domain row's category).

    Returns:
        ``min(limit, len(rows))`` of the same dict objects, in their order in ``rows``.
    """
    if limit >= len(rows):
        return rows
    groups: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(str(row.get(key, "")), []).append(i)
    names = sorted(groups)
    random.Random(seed).shuffle(names)
    quotas = {name: limit * len(groups[name]) / len(rows) for name in names}
    take = {name: int(quotas[name]) for name in names}
    # sorted() is stable: equal remainders keep the seeded order of ``names``.
    for name in sorted(names, key=lambda n: take[n] - quotas[n])[: limit - sum(take.values())]:
        take[name] += 1
    chosen: set[int] = set()
    for name in names:
        members = list(groups[name])
        random.Random(f"{seed}:{name}").shuffle(members)  # str seed: stable across runs and platforms
        chosen.update(members[: take[name]])
    return [row for i, row in enumerate(rows) if i in chosen]


def abstained(answer: str | None, fallback: bool) -> bool:
    """True when the program gave the honest fallback (flagged, or its text in the answer) or
    its answer only says it does not know (``program.stages.selfcheck.is_abstention``: the ``crag``
    and ``rag`` modes pass the generator's "I don't know" through unchanged)."""
    return bool(fallback) or FALLBACK_TEXT.casefold() in (answer or "").casefold() or is_abstention(answer or "")


def is_correct(row: dict, answer: str, fallback: bool) -> bool:
    """Correctness of one answer for ``row``: a gold string in the answer (case-insensitive),
    or, for a row marked ``answerable: false``, an abstention (:func:`abstained`)."""
    if not row["answerable"]:
        return abstained(answer, fallback)
    return answer_correct(answer, row["gold"])
