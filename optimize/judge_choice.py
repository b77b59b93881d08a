"""Choose, per judgment, the prompted LM, the trained judge or their cascade, on the same dev rows.

The compile measures each LM predictor on a seeded sample of dev rows (``optimize.compile``);
this module scores the same rows with the trained judge and with the cascade (the trained
judge outside its uncertainty band, the LM's own prediction for that row inside it), so the
three candidates are compared on identical labels without a single extra LM call. The passage
and strip judgments and the support check are also measured on PopQA ``dev`` (``popqa_lm_rows``:
up to 16 LM calls each), since one judge serves both kinds of knowledge base. Each knowledge base gets the candidate
best on its own rows (``JudgeSet.choices_by_corpus``); any other knowledge base gets the one
best on the mean of the sets. Ties go to the cheaper one (trained, then cascade, then LM).

Each judgment measures its own candidates (its training slice's ``candidates``,
``optimize.judgments``): ``passage``: action-band accuracy of GradeRetrieval's rows (each
passage's score read through the evaluator's thresholds); ``strip``: F1 of the strips kept;
``support``: IsSup verdict accuracy (fully / partially / no; on PopQA's claims, labeled only
fully / no, whether the claim is kept).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optimize.continued import ContinuedCheck
from program.judges import JudgeChoice, JudgeSet
from program.judges.store import corpus_key
from program.judgments import CANDIDATES, PASSAGE, STRIP, SUPPORT, predictor_of
from program.stages.selfcheck import lexical_support

CHEAPEST_FIRST = CANDIDATES







def popqa_lm_rows(program, popqa_kb, n: int = 16, seed: int = 0) -> dict:
    """The LM's rows on PopQA ``dev`` for the three judgments, labeled as the judges' training
    pairs are (``optimize.training.pairs``): ``n`` passages, ``n`` strips and ``n`` claims
    (``popqa_claims``), half relevant or supported, from a seeded sample of dev questions;
    one LM call each (a claim word overlap already calls ``fully`` needs none), asked of
    ``program``'s predictors (a ``CRAG``).

    Returns ``{"grading": rows, "strips": rows, "support": rows}`` of ``(example, prediction, None)``.
    """
    import random

    import dspy

    from eval_sets.popqa import load_questions
    from optimize.training.pairs import names_subject, popqa_claims, states_answer
    from program.lm.configure import CRITIQUE_CONFIG
    from program.stages.refine import decompose

    rng = random.Random(seed)
    questions = load_questions(split="dev")
    rng.shuffle(questions)
    passages, strips = {True: [], False: []}, {True: [], False: []}
    for q, found in zip(questions, popqa_kb.search_batch([q["question"] for q in questions[:120]], 3)):
        for p in found:
            about = names_subject(p.text, q["subject"])
            label = about and states_answer(p.text, q["possible_answers"])
            passages[label].append(dspy.Example(question=q["question"], passage=p.text[:700], relevance=float(label),
                                                reason="relevant" if label else "irrelevant"))
            for strip in decompose(p):
                ok = names_subject(strip.text, q["subject"]) and states_answer(strip.text, q["possible_answers"])
                strips[ok].append(dspy.Example(question=q["question"], strip=strip.text, relevant=ok, context=p.text))
    claims = {True: [], False: []}
    for r in popqa_claims(questions[:120], popqa_kb, seed=seed):
        claims[r["support"] == "fully"].append(dspy.Example(claim=r["claim"], evidence=r["evidence"],
                                                            support=r["support"], question=r["question"]))
    rows = {}
    for judgment, pool in ((PASSAGE, passages), (STRIP, strips), (SUPPORT, claims)):
        chosen = [e for label in (True, False) for e in rng.sample(pool[label], min(n // 2, len(pool[label])))]
        kind = judgment.rows
        rows[kind] = []
        for example in chosen:
            example = example.with_inputs(*judgment.signature.input_fields)
            if judgment is SUPPORT and lexical_support(example.claim, example.evidence, example.question) == "fully":
                rows[kind].append((example, None, None))  # decided without the LM, as in the program
                continue
            predictor = predictor_of(program, judgment)
            try:
                if judgment is SUPPORT:  # asked as the program asks it (optimize.continued)
                    pred = ContinuedCheck(predictor)(**example.inputs(), question=example.question)
                else:
                    pred = predictor(**example.inputs(), config=CRITIQUE_CONFIG)
            except Exception:  # unparsed output is a row the LM got wrong
                pred = None
            rows[kind].append((example, pred, None))
    return rows


def best(figures: dict) -> str:
    """The candidate with the highest figure; ties go to the cheaper one."""
    return max(CHEAPEST_FIRST, key=lambda c: (figures[c], -CHEAPEST_FIRST.index(c)))


def choose(judges: JudgeSet, lm_rows: dict, popqa_rows: dict | None = None, adversarial_kb=None,
           popqa_kb=None, *, measures: dict) -> tuple[dict, JudgeSet]:
    """Measure the three candidates of each judgment on the LM's dev rows and choose one each.

    Args:
        measures: judgment -> ``measure(judges, rows, thresholds, set_name)``, its candidates'
            figures on one set's rows (``optimize.judgments.JUDGES``' ``measure``).
        lm_rows: ``"grading"`` / ``"strips"`` / ``"support"`` -> the kept LM predictor's
            ``(example, prediction, score)`` adversarial dev rows; a missing kind keeps the
            trained judge.
        popqa_rows: the same for PopQA dev (``popqa_lm_rows``; support by kept accuracy). A
            judgment measured on both sets is judged by the mean of its two figures.
        adversarial_kb, popqa_kb: the two knowledge bases: the adversarial one's calibrated
            thresholds read the trained passage scores of its rows, and each gets its own
            choice (``JudgeSet.choices_by_corpus``) from its own rows.

    Returns:
        ``(report, chosen)``: the report ``{judgment: {"lm": .., "trained": .., "cascade": ..,
        "chosen": .., "dev_rows": n, "by_set": {"adversarial": {...}, "popqa": {...}}}}``, and a
        new ``JudgeSet`` with those choices (``choices``, ``choices_by_corpus``); ``judges`` is
        left as it was.
    """
    adversarial_t = judges.thresholds_for(adversarial_kb) if adversarial_kb is not None else judges.thresholds
    report = {}
    choices = dict(judges.choices)
    by_corpus = {key: dict(own) for key, own in judges.choices_by_corpus.items()}
    for judgment, measure in measures.items():
        sets = {"adversarial": (lm_rows.get(judgment.rows), adversarial_t),
                "popqa": ((popqa_rows or {}).get(judgment.rows), judges.thresholds)}
        by_set = {name: measure(judges, rows, t, name) for name, (rows, t) in sets.items() if rows}
        if not by_set:
            choices[judgment.name] = JudgeChoice("trained")
            report[judgment.name] = {"chosen": "trained", "dev_rows": 0, "note": "LM not measured in this compile"}
            continue
        figures = {c: round(float(np.mean([f[c] for f in by_set.values()])), 4) for c in CHEAPEST_FIRST}
        chosen = best(figures)
        choices[judgment.name] = JudgeChoice(chosen)
        for name, kb in (("adversarial", adversarial_kb), ("popqa", popqa_kb)):
            if name in by_set and kb is not None:
                by_set[name]["chosen"] = best(by_set[name])
                by_corpus.setdefault(corpus_key(kb), {})[judgment.name] = JudgeChoice(by_set[name]["chosen"])
        report[judgment.name] = {**figures, "chosen": chosen, "by_set": by_set,
                            "dev_rows": sum(len(rows) for rows, _ in sets.values() if rows)}
    return report, replace(judges, choices=choices, choices_by_corpus=by_corpus)
