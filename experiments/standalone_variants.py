"""Follow-up rewrites: variants of ``StandaloneQuestion`` against the questions written by hand.

Usage::

    python -m experiments.standalone_variants [--splits train,dev] [--variants committed,keep-words,refers-to]
        [--out reports/standalone-variants]

Rows: ``eval_sets/followups`` of ``--splits`` (never test). Each variant rewrites every follow-up
with the configured LM (the embedded 1.5B unless ``CRAG_LM`` names another), temperature 0:

- ``committed``: the Signature as the program runs it (``program.stages.followup.FollowUp``);
- ``keep-words``: instructions asking to keep the user's words and replace only the references;
- ``refers-to``: an output field naming what the follow-up refers to, written before the question.

Per variant: the content-word F1 with the hand-written question
(``optimize.predictor_metrics.standalone_overlap``), ``filled`` (the rewrite names every word the
hand-written question adds to the follow-up), ``kept`` (the share of the follow-up's content words
the rewrite keeps). For the committed rewrite, retrieval recall@3 on the knowledge base of each
row's domain: a relevant chunk of the source question among the first 3 passages searched with
the follow-up, the rewrite, the hand-written question, and the rewrite fused by rank with what
the user wrote (the user turns and the follow-up; each searched for 6, the first 3 kept).

Writes ``<out>/summary.json`` and ``<out>/rows.csv``, and prints the summary.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import dspy

from optimize.predictor_metrics import standalone_overlap
from program.atomic import write_atomic
from program.stages.followup import TURNS_READ, FollowUp
from program.text import content_words
from signatures import StandaloneQuestion

KEEP_WORDS = """Rewrite the user's last message so that someone who never saw the conversation
understands it. Keep the user's own words and their order. Replace only each pronoun or reference ("it",
"that one", "the first one", "those daemons", "there") with the exact name it stands for in the
conversation: the product, the setting or field, the document, the version, the team. Where the message
leaves words out ("And A9?", "What about for Deployments?"), add the words of the earlier question it
continues. Do not answer it and add nothing the user did not ask about. A message that already stands on
its own is returned unchanged."""

class StandaloneQuestionReferring(dspy.Signature):
    """Rewrite the user's last message as a standalone question that someone who never saw the
    conversation could answer from the documents. First say what the message's pronouns and references
    ("it", "that setting", "the second option") stand for and what an ellipsis ("and for Deployments?")
    leaves out, in the conversation's own words. Then write the question with those names in place. Ask
    exactly what the user asks: add no answer, no fact and no detail the user did not ask about. A message
    that already stands on its own is returned as it is."""

    conversation: str = dspy.InputField(desc="the earlier turns, oldest first, one per line as 'user: ...' or "
                                             "'assistant: ...'")
    followup: str = dspy.InputField(desc="the user's last message")
    refers_to: str = dspy.OutputField(desc="what the message refers to or leaves out, named as in the conversation")
    standalone_question: str = dspy.OutputField(desc="one self-contained question")


def rewriter(variant: str) -> FollowUp:
    """The program's ``FollowUp`` (its fallbacks included) with the variant's Signature."""
    follow_up = FollowUp()
    if variant == "keep-words":
        follow_up.rewrite.signature = StandaloneQuestion.with_instructions(" ".join(KEEP_WORDS.split()))
    elif variant == "refers-to":
        follow_up.rewrite = dspy.Predict(StandaloneQuestionReferring)
    elif variant != "committed":
        raise SystemExit(f"error: --variants: unknown variant {variant!r} (committed, keep-words, refers-to)")
    return follow_up


def said(row: dict) -> str:
    """What the user wrote: the user turns among the last ``TURNS_READ`` and the follow-up."""
    turns = [m["content"] for m in row["history"][-TURNS_READ:] if m["role"] == "user"]
    return " ".join([*turns, row["followup"]])


def recall(rows: list[dict], rewrites: dict[str, str]) -> dict:
    """recall@3 per query form over the rows whose source question has relevant chunks."""
    from eval_sets.domains import domain, load_rows
    from optimize.training.pairs import chunk_key
    from program.app import resources
    from program.retrieval.fusion import fuse_passages

    hits: dict[str, list[bool]] = {"followup": [], "rewrite": [], "hand": [], "rewrite+said": []}
    for name in sorted({r["domain"] for r in rows}):
        kb = resources.knowledge_base(domain(name).kb_dir)
        source = {q["id"]: q for s in ("train", "dev", "test") for q in load_rows(name, "queries", s)}
        for r in (r for r in rows if r["domain"] == name):
            relevant = set(source[r["source_id"]].get("relevant_chunk_ids") or [])
            if not relevant:
                continue
            found = {"followup": kb.search(r["followup"], 3), "rewrite": kb.search(rewrites[r["id"]], 3),
                     "hand": kb.search(r["standalone"], 3),
                     "rewrite+said": fuse_passages([kb.search(q, 6) for q in (rewrites[r["id"]], said(r))])[:3]}
            for form, passages in found.items():
                hits[form].append(any(chunk_key(p.id) in relevant for p in passages))
    return {form: {"hits": sum(h), "rows": len(h)} for form, h in hits.items()}


def main(argv: list[str] | None = None) -> int:
    from eval_sets import followups
    from program.lm.configure import configure_lm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", default="train,dev", help="comma-separated (train, dev)")
    parser.add_argument("--variants", default="committed,keep-words,refers-to")
    parser.add_argument("--out", default="reports/standalone-variants")
    args = parser.parse_args(argv)
    splits = args.splits.split(",")
    if "test" in splits:
        raise SystemExit("error: --splits: the test rows are for final figures, not for choosing a variant")
    configure_lm()
    rows = [r for s in splits for r in followups.load_rows(split=s)]
    summary, written = {"rows": len(rows), "splits": splits}, {}
    for variant in args.variants.split(","):
        follow_up = rewriter(variant)
        out = written[variant] = {r["id"]: follow_up(history=followups.history(r), followup=r["followup"])
                                  for r in rows}
        f1, filled, kept = [], [], []
        for r in rows:
            got = content_words(out[r["id"]])
            f1.append(standalone_overlap(dspy.Example(standalone_question=r["standalone"]),
                                         dspy.Prediction(standalone_question=out[r["id"]])))
            filled.append(content_words(r["standalone"]) - content_words(r["followup"]) <= got)
            asked = content_words(r["followup"])
            kept.append(len(asked & got) / max(len(asked), 1))
        summary[variant] = {name: round(sum(v) / len(v), 3) for name, v in
                            (("f1", f1), ("filled", filled), ("kept", kept))}
    if "committed" in written:
        summary["recall@3"] = recall(rows, written["committed"])
    target = Path(args.out)
    target.mkdir(parents=True, exist_ok=True)
    write_atomic(target / "summary.json", json.dumps(summary, indent=2))
    with open(target / "rows.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "followup", "hand", *written])
        for r in rows:
            w.writerow([r["id"], r["followup"], r["standalone"], *(written[v][r["id"]] for v in written)])
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
