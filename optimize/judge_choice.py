"""Choose, per judgment, the prompted LM, the trained judge or their cascade, on the same dev rows.

The compile measures each LM predictor on a seeded sample of dev rows (``optimize.compile``);
this module scores the same rows with the trained judge and with the cascade (the trained
judge outside its uncertainty band, the LM's own prediction for that row inside it), so the
three candidates are compared on identical labels without a single extra LM call. The passage
and strip judgments and the support check are also measured on PopQA ``dev`` (``popqa_lm_rows``:
up to 16 LM calls each), since one judge serves both kinds of knowledge base. Each knowledge base gets the candidate
best on its own rows (``JudgeSet.choices_by_corpus``); any other knowledge base gets the one
best on the mean of the sets. Ties go to the cheaper one (trained, then cascade, then LM).

Figures, by judgment: ``passage``: action-band accuracy of GradeRetrieval's rows (each
passage's score read through the evaluator's thresholds); ``strip``: F1 of the strips kept;
``support``: IsSup verdict accuracy (fully / partially / no; on PopQA's claims, labeled only
fully / no, whether the claim is kept).
"""

from __future__ import annotations

import numpy as np

from optimize import predictor_metrics as pm
from program.judges import JudgeChoice, JudgeSet
from program.judges.features import cue_pairs, passage_features, strip_features
from program.judges.store import corpus_key
from program.stages.evaluator import score_grade
from program.stages.selfcheck import RANKED_VERDICTS, VERDICT_VALUE, judge_support, lexical_support
from program.types import Passage, Strip

CHEAPEST_FIRST = ("trained", "cascade", "lm")
KIND_OF = {"passage": "grading", "strip": "strips", "support": "support"}


def _band_accuracy(pairs) -> float:
    return round(float(np.mean([a == b for a, b in pairs])), 4) if pairs else 0.0


def passage_candidates(judges: JudgeSet, rows, thresholds: dict) -> dict:
    """``{"lm", "trained", "cascade"}`` -> band accuracy on GradeRetrieval's dev rows, the
    trained scores read through ``thresholds`` (those of the rows' knowledge base)."""
    t = thresholds
    out = {"lm": [], "trained": [], "cascade": []}
    vectors = judges._encode([e.question for e, _, _ in rows] + [e.passage for e, _, _ in rows]) if rows else []
    n = len(rows)
    for i, (example, pred, _) in enumerate(rows):
        truth = pm.grade_band(float(example.relevance))
        try:
            lm_band = pm.grade_band(score_grade(pred.same_entity, pred.answers_question, pred.outdated)[0])
        except Exception:  # noqa: BLE001 - an unparsed LM row counts as irrelevant, as in the program
            lm_band = "incorrect"
        cos = float(vectors[i] @ vectors[n + i])
        score = judges.judges["passage"].score(passage_features(example.question, example.passage, cos),
                                                cue_pairs(example.question, example.passage))
        trained_band = pm.grade_band(score, t["upper"], t["lower"])
        out["lm"].append((lm_band, truth))
        out["trained"].append((trained_band, truth))
        out["cascade"].append((lm_band if JudgeChoice("cascade").asks_lm(score) else trained_band, truth))
    return {k: _band_accuracy(v) for k, v in out.items()}


def strip_candidates(judges: JudgeSet, rows) -> dict:
    """``{"lm", "trained", "cascade"}`` -> F1 of kept strips on StripRelevance's dev rows."""
    keep = judges.thresholds.get("strip_keep", 0.5)
    kept = {"lm": [], "trained": [], "cascade": []}
    labels = []
    for example, pred, _ in rows:
        context = getattr(example, "context", None) or example.strip
        strip = Strip("row", 0, example.strip)
        vectors = judges._encode([example.question, context])
        passage = Passage("row", context, score=float(vectors[1] @ vectors[0]))  # as in training
        score = judges.strip_scores(example.question, [strip], [passage])[0]
        lm_kept = pred is not None and pm.kept_strip(example, pred)
        kept["lm"].append(lm_kept)
        kept["trained"].append(score >= keep)
        kept["cascade"].append(lm_kept if JudgeChoice("cascade").asks_lm(score) else score >= keep)
        labels.append(bool(example.relevant))
    from program.judges.train import f1

    return {k: f1(labels, v) for k, v in kept.items()}


def support_candidates(judges: JudgeSet, rows, kept_only: bool = False) -> dict:
    """``{"lm", "trained", "cascade"}`` -> verdict accuracy on CheckClaimSupport's dev rows.

    The LM candidate is what the self-check decides with it (the better of word overlap and
    the model's quote); the trained one is the support judge's verdict, word overlap's
    ``fully`` standing as in the program. ``kept_only``: right when the claim is kept
    (``partially`` or ``fully``) exactly when its label supports it, for rows labeled only
    ``fully`` / ``no`` (PopQA's claims)."""
    right = {"lm": [], "trained": [], "cascade": []}
    for example, pred, _ in rows:
        question = getattr(example, "question", None) or ""  # PopQA's claims know their question
        lexical = lexical_support(example.claim, example.evidence, question)
        quote = str(getattr(pred, "quote", "") or "") if pred is not None else ""
        lm = max(lexical, judge_support(example.claim, quote, example.evidence, question), key=RANKED_VERDICTS.index)
        if lexical == "fully":
            trained = cascade = "fully"
        else:
            score = judges.support_score(example.claim, example.evidence, VERDICT_VALUE[lexical], question)
            trained = judges.support_verdict(score)
            cascade = lm if JudgeChoice("cascade").asks_lm(score) else trained
        for name, verdict in (("lm", lm), ("trained", trained), ("cascade", cascade)):
            right[name].append((verdict != "no") == (example.support != "no") if kept_only else verdict == example.support)
    return {k: round(float(np.mean(v)), 4) if v else 0.0 for k, v in right.items()}


def popqa_lm_rows(predictors: dict, popqa_kb, n: int = 16, seed: int = 0) -> dict:
    """The LM's rows on PopQA ``dev`` for the three judgments, labeled as the judges' training
    pairs are (``program.judges.pairs``): ``n`` passages, ``n`` strips and ``n`` claims
    (``popqa_claims``), half relevant or supported, from a seeded sample of dev questions;
    one LM call each (a claim word overlap already calls ``fully`` needs none).

    Returns ``{"grading": rows, "strips": rows, "support": rows}`` of ``(example, prediction, None)``.
    """
    import random

    import dspy

    from eval_sets.popqa import load_questions
    from program.judges.pairs import names_subject, popqa_claims, states_answer
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
    inputs_of = {"grading": ("question", "passage"), "strips": ("question", "strip"), "support": ("claim", "evidence")}
    for kind, pool, path in (("grading", passages, "evaluator.grade"), ("strips", strips, "refiner.grade"),
                             ("support", claims, "checker.support")):
        chosen = [e for label in (True, False) for e in rng.sample(pool[label], min(n // 2, len(pool[label])))]
        rows[kind] = []
        for example in chosen:
            example = example.with_inputs(*inputs_of[kind])
            if kind == "support" and lexical_support(example.claim, example.evidence, example.question) == "fully":
                rows[kind].append((example, None, None))  # decided without the LM, as in the program
                continue
            try:
                pred = predictors[path](**example.inputs(), config=CRITIQUE_CONFIG)
            except Exception:  # noqa: BLE001 - unparsed output is a row the LM got wrong
                pred = None
            rows[kind].append((example, pred, None))
    return rows


def best(figures: dict) -> str:
    """The candidate with the highest figure; ties go to the cheaper one."""
    return max(CHEAPEST_FIRST, key=lambda c: (figures[c], -CHEAPEST_FIRST.index(c)))


def choose(judges: JudgeSet, lm_rows: dict, popqa_rows: dict | None = None, adversarial_kb=None,
           popqa_kb=None) -> dict:
    """Measure the three candidates of each judgment on the LM's dev rows and set ``judges.choices``.

    Args:
        lm_rows: ``"grading"`` / ``"strips"`` / ``"support"`` -> the kept LM predictor's
            ``(example, prediction, score)`` adversarial dev rows; a missing kind keeps the
            trained judge.
        popqa_rows: the same for PopQA dev (``popqa_lm_rows``; support by kept accuracy). A
            judgment measured on both sets is judged by the mean of its two figures.
        adversarial_kb, popqa_kb: the two knowledge bases: the adversarial one's calibrated
            thresholds read the trained passage scores of its rows, and each gets its own
            choice (``JudgeSet.choices_by_corpus``) from its own rows.

    Returns:
        ``{judgment: {"lm": .., "trained": .., "cascade": .., "chosen": .., "dev_rows": n,
        "by_set": {"adversarial": {...}, "popqa": {...}}}}``.
    """
    adversarial_t = judges.thresholds_for(adversarial_kb) if adversarial_kb is not None else judges.thresholds
    measure = {"passage": lambda rows, t, name: passage_candidates(judges, rows, t),
               "strip": lambda rows, t, name: strip_candidates(judges, rows),
               "support": lambda rows, t, name: support_candidates(judges, rows, kept_only=name == "popqa")}
    report = {}
    for judgment, kind in KIND_OF.items():
        sets = {"adversarial": (lm_rows.get(kind), adversarial_t),
                "popqa": ((popqa_rows or {}).get(kind), judges.thresholds)}
        by_set = {name: measure[judgment](rows, t, name) for name, (rows, t) in sets.items() if rows}
        if not by_set:
            judges.choices[judgment] = JudgeChoice("trained")
            report[judgment] = {"chosen": "trained", "dev_rows": 0, "note": "LM not measured in this compile"}
            continue
        figures = {c: round(float(np.mean([f[c] for f in by_set.values()])), 4) for c in CHEAPEST_FIRST}
        chosen = best(figures)
        judges.choices[judgment] = JudgeChoice(chosen)
        for name, kb in (("adversarial", adversarial_kb), ("popqa", popqa_kb)):
            if name in by_set and kb is not None:
                by_set[name]["chosen"] = best(by_set[name])
                judges.choices_by_corpus.setdefault(corpus_key(kb), {})[judgment] = JudgeChoice(by_set[name]["chosen"])
        report[judgment] = {**figures, "chosen": chosen, "by_set": by_set,
                            "dev_rows": sum(len(rows) for rows, _ in sets.values() if rows)}
    return report
