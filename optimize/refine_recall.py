"""Does refinement keep the answer? Answering-strip recall of the refiner, per labeled question.

CRAG refines passages into knowledge strips (§4.4); a strip filter that drops the answering
strip costs the reader the answer, and where the program refines, a question with no strip
kept gets no draft from its passages (CRAG's *incorrect*: the correction runs). This measures
both as the program runs it: for each labeled PopQA question, its top-``k`` knowledge-base
passages, scored by the compiled passage judge, refined by ``KnowledgeRefiner`` with the
compiled strip judge. A strip *answers* when it names the question's subject (or follows a
passage about it with a pronoun) and states a gold answer: the labels the strip judge is
trained on (``optimize.training.pairs.popqa_strip_pairs``).

``compiled/refinement.json`` records the figures and ``refine_passages`` (recall at least
90 %: ``program.app.refinement``), which ``load_compiled`` gives the program. The documentation
domains have no question-level strip labels; their strip rows keep a third to a half of the
answering strips (``docs/lab/2026-12-05-greedy-confidence.md``) and are read whole.

    python -m optimize.refine_recall --split dev --out compiled

No LM call; about 2 minutes for PopQA dev's 302 questions on 2 cores. ``python -m
optimize.compile`` runs it (``measure``) whenever it trains the judges anew.
"""

from __future__ import annotations

import argparse
import re
import sys

from optimize.training.pairs import names_subject, states_answer
from program.judgments import PASSAGE
from program.judges.store import corpus_key, load_judges
from program.stages.refine import KnowledgeRefiner, decompose

_PRONOUN = re.compile(r"(he|she|it|they|his|her)\b", re.I)


def answering(strip_text: str, passage_text: str, question: dict) -> bool:
    """True when the strip answers ``question`` (a PopQA row with ``subject`` and
    ``possible_answers``), labeled as the strip judge's training rows are."""
    on_subject = names_subject(strip_text, question["subject"]) or (
        names_subject(passage_text, question["subject"]) and bool(_PRONOUN.match(strip_text.strip())))
    return bool(on_subject and states_answer(strip_text, question["possible_answers"]))


def reach(questions: list[dict], kb, judges, embedder, k: int = 3) -> dict:
    """Refine each question's top-``k`` passages as ``CRAG`` does.

    Returns ``{"questions", "kept", "recall", "nothing_kept", "nothing_kept_answerable"}``:
    the questions with an answering strip in their passages, how many of them had one among
    the kept strips, ``recall`` = kept / questions (0.0 when there are none); and over every
    question, how many had no strip kept (the program then writes no draft from its
    passages), and how many of those did hold an answering strip (what that costs).
    """
    upper = judges.thresholds_for(kb)["upper"]
    refiner = KnowledgeRefiner(embedder, judges=judges)
    counts = {"questions": 0, "kept": 0, "nothing_kept": 0, "nothing_kept_answerable": 0}
    for q, passages in zip(questions, kb.search_batch([q["question"] for q in questions], k)):
        answers = {(s.source_id, s.text) for p in passages for s in decompose(p) if answering(s.text, p.text, q)}
        scores = judges.score(PASSAGE, question=q["question"], passages=passages)
        relevant = [p.id for p, score in zip(passages, scores) if score >= upper]
        kept = refiner(question=q["question"], passages=passages, relevant_ids=relevant).kept
        counts["nothing_kept"] += not kept
        if answers:
            counts["questions"] += 1
            counts["kept"] += any((s.source_id, s.text) in answers for s in kept)
            counts["nothing_kept_answerable"] += not kept
    counts["recall"] = round(counts["kept"] / counts["questions"], 4) if counts["questions"] else 0.0
    return counts


def measure(judges, split: str = "dev", out=None) -> dict:
    """``reach`` for PopQA's ``split`` with ``judges`` (a ``JudgeSet``) over the embedded PopQA
    knowledge base, printed in one line and, with ``out``, saved to ``out/refinement.json``."""
    # the evaluation sets and the embedded resources load only when measuring
    from eval_sets.popqa import load_questions
    from program.app import resources
    from program.app.refinement import MIN_RECALL, save_refinement

    kb = resources.knowledge_base()
    judges = judges.for_knowledge_base(kb, judges.embedder or resources.embedder())
    questions = load_questions(split=split)
    figures = reach(questions, kb, judges, judges.embedder)
    print(f"popqa {split}: an answering strip kept for {figures['kept']} of {figures['questions']} questions "
          f"that have one ({figures['recall']:.1%}); no strip kept for {figures['nothing_kept']} of {len(questions)} "
          f"questions, {figures['nothing_kept_answerable']} of them with an answering strip; "
          f"refine: {'yes' if figures['recall'] >= MIN_RECALL else 'no'} (at least {MIN_RECALL:.0%})")
    if out:
        path = save_refinement(out, {corpus_key(kb): {"name": "popqa", "split": split, **figures}})
        print(f"wrote {path}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev", help="PopQA split whose labels are counted (default dev: "
                        "the strip judge trained on train)")
    parser.add_argument("--compiled", default="compiled", help="the compiled folder whose judges refine")
    parser.add_argument("--out", default=None, help="write refinement.json into this folder (default: print only)")
    args = parser.parse_args(argv)
    judges = load_judges(args.compiled)
    if judges is None:
        print(f"error: {args.compiled} holds no trained judges; run python -m optimize.compile --out DIR --only judges",
              file=sys.stderr)
        return 2
    measure(judges, args.split, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
