"""Passage relevance's training slice (CRAG §4.2): its judge fit on PopQA ``train`` and the adversarial
``train`` rows, the evaluator's ``lower`` / ``upper`` calibrated per knowledge base, its dev figures
and its candidates' measure."""

from __future__ import annotations

import numpy as np

from optimize import predictor_metrics as pm
from optimize.metrics import confusion
from optimize.judgments.base import Fitted, JudgmentTraining, TrainingData
from optimize.training import pairs as jd
from program.adaptation.calibrate import GRID, auc, calibrate_actions, group_runs, popqa_expected, question_best
from program.adaptation.fit import fit_judge, out_of_fold, pair_scores
from program.judges import JudgeChoice, JudgeSet
from program.judges.store import corpus_key
from program.judgments import PASSAGE
from program.stages.decision import evaluator_action
from program.stages.evaluator import score_grade
from program.types import Passage


def fit(data: TrainingData) -> Fitted:
    """The passage judge and, as ``by_corpus``, the evaluator's thresholds per knowledge base
    (``thresholds``: PopQA's ``lower`` / ``upper``, the default), from the train splits."""
    popqa_train = jd.popqa_passage_pairs(data.train_q, data.popqa_kb)
    adv_train = jd.adversarial_passage_pairs(data.adv[PASSAGE.rows]["train"], data.adv["queries"]["train"],
                                             data.adversarial_kb, data.embedder)
    passage_pairs = jd.Pairs().extend(popqa_train).extend(adv_train)
    passage = fit_judge(PASSAGE, passage_pairs)
    oof = out_of_fold(PASSAGE, passage_pairs)
    n_pop = len(popqa_train)
    # Thresholds per knowledge base, each on its own training questions' top-3 passages:
    # one judge's scores mean different things on encyclopedia pages and help-centre pages.
    best, expected, lower = popqa_expected(popqa_train.groups, popqa_train.labels, oof[:n_pop])
    popqa_thresholds = {**calibrate_actions(best, expected), "lower": lower}
    popqa_thresholds["upper"] = max(popqa_thresholds["upper"], lower)
    query_rows = [i for i in range(n_pop, len(passage_pairs)) if passage_pairs.groups[i].startswith("query-")]
    adv_best, _, _ = popqa_expected([passage_pairs.groups[i] for i in query_rows],
                                    [passage_pairs.labels[i] for i in query_rows], oof[query_rows])
    adv_expected = {r["id"]: r["expected_action"] for r in data.adv["queries"]["train"]
                    if r.get("needs_retrieval", True)}
    adv_thresholds = calibrate_actions(adv_best, adv_expected)
    thresholds = {"lower": popqa_thresholds["lower"], "upper": popqa_thresholds["upper"]}
    by_corpus = {corpus_key(data.popqa_kb): {"name": "popqa", **popqa_thresholds},
                 corpus_key(data.adversarial_kb): {"name": "adversarial", **adv_thresholds}}
    return Fitted(passage, passage_pairs, thresholds, by_corpus)


def _popqa_figures(judges: JudgeSet, data: TrainingData) -> dict:
    """PopQA dev passage figures: AUC and the "any top-3 relevant" accuracy, beside plain cosine's."""
    t = judges.thresholds
    pop = jd.popqa_passage_pairs(data.dev_q, data.popqa_kb)
    scores = pair_scores(judges, PASSAGE, pop)
    cosine = np.array([d[0] for d in pop.dense])
    top3 = np.array([i < 3 for g in group_runs(pop.groups) for i in range(g)])
    any_rel = {g: False for g in pop.groups}
    for g, label, t3 in zip(pop.groups, pop.labels, top3):
        any_rel[g] |= bool(label) and bool(t3)
    best = question_best(np.array(pop.groups)[top3], scores[top3])
    best_cos = question_best(np.array(pop.groups)[top3], cosine[top3])
    # the baseline's best case
    cos_t = max(GRID, key=lambda x: np.mean([(best_cos[q] >= x) == any_rel[q] for q in best_cos]))
    return {
        "pairs": len(pop), "questions": len(best), "passage_auc": auc(pop.labels, scores),
        "cosine_auc": auc(pop.labels, cosine),
        "any_relevant_accuracy": round(float(np.mean([(best[q] >= t["upper"]) == any_rel[q] for q in best])), 4),
        "cosine_any_relevant_accuracy_best_threshold": round(float(np.mean([(best_cos[q] >= cos_t) == any_rel[q]
                                                                            for q in best_cos])), 4),
        "share_any_relevant": round(float(np.mean(list(any_rel.values()))), 4)}


def _adversarial_figures(judges: JudgeSet, data: TrainingData) -> dict:
    """Adversarial dev figures: action accuracy and confusion on the queries, band accuracy and
    AUC on the grading rows."""
    adv, adversarial_kb, embedder = data.adv, data.adversarial_kb, data.embedder
    adv_pairs = jd.adversarial_passage_pairs([], adv["queries"]["dev"], adversarial_kb, embedder)
    adv_scores = pair_scores(judges, PASSAGE, adv_pairs)
    top3 = [i < 3 for g in group_runs(adv_pairs.groups) for i in range(g)]
    best_adv = question_best([g for g, k in zip(adv_pairs.groups, top3) if k],
                             [s for s, k in zip(adv_scores, top3) if k])
    expected = {r["id"]: r["expected_action"] for r in adv["queries"]["dev"] if r.get("needs_retrieval", True)}
    ta = judges.thresholds_for(adversarial_kb)  # calibrated on the adversarial train queries
    predicted = {q: evaluator_action(best_adv.get(q, 0.0), ta["lower"], ta["upper"]) for q in expected}
    grading = jd.adversarial_passage_pairs(adv[PASSAGE.rows]["dev"], [], adversarial_kb, embedder)
    grade_scores = pair_scores(judges, PASSAGE, grading)
    bands = [evaluator_action(r, 0.2, 0.6) for r in grading.targets]  # relevance label -> band, as the LM's metric
    return {
        "queries": len(expected),
        "action_accuracy": round(float(np.mean([predicted[q] == expected[q] for q in expected])), 4),
        "confusion": confusion(expected, predicted),
        "thresholds": {"lower": ta["lower"], "upper": ta["upper"]},
        "grading_band_accuracy": round(float(np.mean([evaluator_action(s, ta["lower"], ta["upper"]) == b
                                                       for s, b in zip(grade_scores, bands)])), 4),
        "grading_auc": auc(grading.labels, grade_scores)}


def dev_figures(judges: JudgeSet, data: TrainingData) -> dict:
    """PopQA dev passage AUC and the "any top-3 relevant" decision (beside plain cosine's);
    adversarial dev action accuracy on the queries and band accuracy on the grading rows."""
    return {"popqa_dev": _popqa_figures(judges, data), "adversarial_dev": _adversarial_figures(judges, data)}


def _band_accuracy(pairs) -> float:
    return round(float(np.mean([a == b for a, b in pairs])), 4) if pairs else 0.0


def candidates(judges: JudgeSet, rows, thresholds: dict, set_name: str = "") -> dict:
    """``{"lm", "trained", "cascade"}`` -> band accuracy on GradeRetrieval's dev rows, the
    trained scores read through ``thresholds`` (those of the rows' knowledge base)."""
    t = thresholds
    out = {"lm": [], "trained": [], "cascade": []}
    vectors = judges._encode([e.question for e, _, _ in rows] + [e.passage for e, _, _ in rows]) if rows else []
    n = len(rows)
    for i, (example, pred, _) in enumerate(rows):
        truth = evaluator_action(float(example.relevance), pm.LM_LOWER, pm.LM_UPPER)
        try:
            lm_band = evaluator_action(score_grade(pred.same_entity, pred.answers_question, pred.outdated)[0],
                                       pm.LM_LOWER, pm.LM_UPPER)
        except Exception:  # an unparsed LM row counts as irrelevant, as in the program
            lm_band = "incorrect"
        cos = float(vectors[i] @ vectors[n + i])
        score = judges.score(PASSAGE, question=example.question,
                             passages=[Passage("row", example.passage, score=cos)])[0]
        trained_band = evaluator_action(score, t["lower"], t["upper"])
        out["lm"].append((lm_band, truth))
        out["trained"].append((trained_band, truth))
        out["cascade"].append((lm_band if JudgeChoice("cascade").asks_lm(score) else trained_band, truth))
    return {k: _band_accuracy(v) for k, v in out.items()}


TRAINING = JudgmentTraining(PASSAGE, pm.grading_metric, pm.grading_figures, candidates, fit, dev_figures)
