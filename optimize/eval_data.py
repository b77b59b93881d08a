"""Evaluation sets as uniform rows, and the correctness rule for one answer.

* :func:`load_set`: ``popqa`` (long-tail PopQA, by the fixed train/dev split of
  ``eval_sets/popqa/split.json``) or a labeled domain (``adversarial``, the hand-labeled Paylane
  help centre; ``kubernetes``; ``handbook``: ``eval_sets.domains``), by split, as dicts with the
  same keys.
* :func:`is_correct`: the CRAG paper's rule (a gold string in the answer, case-insensitive);
  an unanswerable row is correct when the program abstained.
"""

from __future__ import annotations

import sys

from eval_sets.domains import DOMAINS
from eval_sets.domains import load_rows as load_domain_rows
from optimize.metrics import answer_correct
from program.selfcheck import is_abstention
from program.types import FALLBACK_ANSWER

FALLBACK_TEXT = FALLBACK_ANSWER


def load_set(name: str, limit: int | None, seed: int, split: str = "dev") -> list[dict]:
    """Load an evaluation set as uniform rows.

    Args:
        name: ``popqa`` or a labeled domain of ``eval_sets.domains`` (``adversarial``, the help
            centre; ``kubernetes``; ``handbook``).
        limit: number of rows; PopQA takes a seeded sample of ``split`` spread over its
            relations, a domain its first ``limit`` rows of ``split``. None: all.
        seed: PopQA sampling seed.
        split: ``dev`` (default: evaluation runs), ``train`` (analyses only: judges and prompts
            learn from it) or, for a domain, ``test``. PopQA has no ``test`` split.

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
        return [
            {"id": q["id"], "question": q["question"], "relation": q["relation"] or "",
             "gold": list(q["possible_answers"] or []), "expected_action": None, "answerable": True,
             "needs_retrieval": True}
            for q in load_questions(limit=limit, seed=seed, split=split)
        ]
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
        return rows[:limit] if limit else rows
    print(f"error: unknown --set {name!r} (popqa, {', '.join(sorted(DOMAINS))})", file=sys.stderr)
    raise SystemExit(2)


def abstained(answer: str | None, fallback: bool) -> bool:
    """True when the program gave the honest fallback (flagged, or its text in the answer) or
    its answer only says it does not know (``program.selfcheck.is_abstention``: the ``crag``
    and ``rag`` modes pass the generator's "I don't know" through unchanged)."""
    return bool(fallback) or FALLBACK_TEXT.casefold() in (answer or "").casefold() or is_abstention(answer or "")


def is_correct(row: dict, answer: str, fallback: bool) -> bool:
    """Correctness of one answer for ``row``: a gold string in the answer (case-insensitive),
    or, for a row marked ``answerable: false``, an abstention (:func:`abstained`)."""
    if not row["answerable"]:
        return abstained(answer, fallback)
    return answer_correct(answer, row["gold"])
