"""Train the small judges, calibrate their thresholds on ``train``, report them on ``dev``.

``python -m optimize.training.train [--out compiled]`` runs this step alone; ``python -m
optimize.compile`` runs it before compiling the prompts. Seeded, from the repository alone:
PopQA ``train`` questions and knowledge base, the adversarial set's ``train`` rows, and
synthetic support pairs made from PopQA ``train`` documents, and claims made from PopQA
``train`` questions' own strips (``optimize.training.pairs``). The fitting and calibrating
are ``program.adaptation`` 's, which ``program index`` adapts the judges with.

Thresholds are calibrated on out-of-fold scores of the training rows (5 folds grouped by
question), never on the rows a figure is reported on:

* the evaluator's ``lower`` / ``upper`` (CRAG §4.3) for the best action accuracy on the
  adversarial train queries plus the PopQA train "is any top-3 passage relevant" decision;
* ``strip_keep`` for the best strip F1 (CRAG §4.4);
* ``support_fully`` / ``support_partially`` for the best mean of the adversarial rows' IsSup
  verdict accuracy and the PopQA claims' kept accuracy (a claim is kept at ``partially``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

import numpy as np

from eval_sets import adversarial
from eval_sets.adversarial import KB_DIR
from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions, read_jsonl
from optimize.training import pairs as jd
from program.stages.decision import evaluator_action
from program.adaptation.calibrate import (GRID, auc, calibrate_actions, calibrate_support_sets, f1,
                                          group_runs, popqa_expected, question_best, support_accuracy)
from program.adaptation.fit import (LABELED_SUPPORT_WEIGHT, POPQA_CLAIM_WEIGHT, fit_judge, out_of_fold, pair_scores,
                                    trained_set)
from program.app import resources
from program.app.resources import web_backend
from program.judges import JudgeSet, LinearJudge, save_judges
from program.judges.judgments import (PASSAGE, STRIP, STRIP_KEEP, SUPPORT, SUPPORT_FULLY, SUPPORT_PARTIALLY, TRAINED,
                                      Judgment)
from program.judges.store import corpus_key


def fit_from_rows(judgment: Judgment, rows: list[dict], encode) -> tuple[LinearJudge, float]:
    """``(judge, keep threshold)`` for a judgment trained on its own labeled rows alone
    (``Judgment.example``): the threshold is the best out-of-fold F1's, as the strip judge's.

    Args:
        rows: the ``train`` rows of ``judgment.rows``, each with an ``id``.
        encode: ``encode(list[str]) -> np.ndarray`` of L2-normalised rows.

    Raises:
        ValueError: a single label class among the rows."""
    pairs = jd.Pairs()
    for row in rows:
        items, label = judgment.example(row)
        for dense, cues in judgment.inputs(encode, **items):
            pairs.add(dense, cues, label, row["id"])
    oof = out_of_fold(judgment, pairs)
    keep = max(GRID, key=lambda t: (f1(pairs.labels, oof >= t), -abs(t - 0.5)))
    return fit_judge(judgment, pairs), keep


def _passage_judge(train_q, adv, popqa_kb, adversarial_kb, embedder) -> tuple[LinearJudge, jd.Pairs, dict, dict]:
    """``(passage judge, its training pairs, PopQA thresholds, thresholds by corpus)`` from the train splits."""
    popqa_train = jd.popqa_passage_pairs(train_q, popqa_kb)
    adv_train = jd.adversarial_passage_pairs(adv[PASSAGE.rows]["train"], adv["queries"]["train"], adversarial_kb,
                                             embedder)
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
    adv_expected = {r["id"]: r["expected_action"] for r in adv["queries"]["train"] if r.get("needs_retrieval", True)}
    adv_thresholds = calibrate_actions(adv_best, adv_expected)
    thresholds = {"lower": popqa_thresholds["lower"], "upper": popqa_thresholds["upper"]}
    by_corpus = {corpus_key(popqa_kb): {"name": "popqa", **popqa_thresholds},
                 corpus_key(adversarial_kb): {"name": "adversarial", **adv_thresholds}}
    return passage, passage_pairs, thresholds, by_corpus


def _strip_judge(train_q, adv, popqa_kb, web, embedder) -> tuple[LinearJudge, jd.Pairs, float]:
    """``(strip judge, its training pairs, keep threshold)``; the threshold is the best out-of-fold F1's."""
    strip_pairs = (jd.popqa_strip_pairs(train_q, popqa_kb, embedder)
                   .extend(jd.popqa_web_strip_pairs(train_q, web, embedder))
                   .extend(jd.adversarial_strip_pairs(adv[STRIP.rows]["train"], embedder)))
    strip = fit_judge(STRIP, strip_pairs)
    strip_oof = out_of_fold(STRIP, strip_pairs)
    keep = max(GRID, key=lambda t: (f1(strip_pairs.labels, strip_oof >= t), -abs(t - 0.5)))
    return strip, strip_pairs, keep


def _support_judge(train_q, docs: dict, adv, popqa_kb, embedder) -> tuple[LinearJudge, jd.Pairs, float, float]:
    """``(support judge, its pairs, partially, fully)`` from synthetic (on ``docs``), PopQA claim and labeled pairs."""
    train_docs = [(q["id"], docs[q["id"].replace("popqa-", "kb-")]) for q in train_q
                  if q["id"].replace("popqa-", "kb-") in docs]
    synthetic = jd.synthetic_support_pairs(train_docs, embedder)
    claims = jd.popqa_support_pairs(train_q, popqa_kb, embedder)
    support_pairs = (jd.Pairs(cues=None).extend(synthetic).extend(claims)
                     .extend(jd.support_rows_pairs(adv[SUPPORT.rows]["train"], embedder)))
    # the hand-labeled rows weigh as much as the synthetic ones together (paraphrase, partial
    # support); the PopQA claims, answers as the generator states them, in between
    weights = np.array([1.0] * len(synthetic) + [POPQA_CLAIM_WEIGHT] * len(claims)
                       + [LABELED_SUPPORT_WEIGHT] * (len(support_pairs) - len(synthetic) - len(claims)))
    support = fit_judge(SUPPORT, support_pairs, weights=weights)
    support_oof = out_of_fold(SUPPORT, support_pairs, weights=weights)
    labeled = [i for i, g in enumerate(support_pairs.groups) if g.startswith("support-")]
    popqa_rows = slice(len(synthetic), len(synthetic) + len(claims))
    lo, hi, _ = calibrate_support_sets(np.asarray(support_pairs.targets)[labeled], support_oof[labeled],
                                       claims.labels, support_oof[popqa_rows])
    return support, support_pairs, lo, hi


def train_judges(popqa_kb, adversarial_kb, embedder, log=print, web=None) -> JudgeSet:
    """Train, calibrate and measure the three judges; return them with their figures.

    Args:
        popqa_kb: the PopQA knowledge base (``program.app.resources.knowledge_base()``).
        adversarial_kb: the adversarial help-centre knowledge base.
        embedder: the all-MiniLM-L6-v2 embedder (``encode(list[str])``).
        web: the search backend whose pages the strip judge also learns from; default the
            PopQA offline web snapshot (``program.app.resources.web_backend("snapshot")``).
    """
    if web is None:
        web = web_backend("snapshot")

    started = time.perf_counter()

    def log_step(message):
        log(f"judges [{time.perf_counter() - started:6.1f} s]: {message}")

    train_q, dev_q = load_questions(split="train"), load_questions(split="dev")
    adv = {kind: {s: adversarial.load_rows(kind, s) for s in ("train", "dev")}
           for kind in [PASSAGE.rows, STRIP.rows, SUPPORT.rows, "queries"]}

    log_step(f"passage pairs ({len(train_q)} PopQA train questions, adversarial train rows)")
    passage, passage_pairs, thresholds, by_corpus = _passage_judge(train_q, adv, popqa_kb, adversarial_kb, embedder)

    log_step("strip pairs")
    strip, strip_pairs, keep = _strip_judge(train_q, adv, popqa_kb, web, embedder)

    log_step("support pairs (labeled, synthetic and PopQA claims)")
    docs = {r["doc_id"]: r["text"] for r in read_jsonl(KNOWLEDGE_BASE_PATH)}
    support, support_pairs, lo, hi = _support_judge(train_q, docs, adv, popqa_kb, embedder)

    fitted, keeps = {PASSAGE: passage, STRIP: strip, SUPPORT: support}, {}
    for judgment in TRAINED:
        if judgment.example is not None:  # a judgment learned from its own labeled rows alone
            log_step(f"{judgment.name} pairs")
            fitted[judgment], keeps[judgment.keep.key] = fit_from_rows(
                judgment, adversarial.load_rows(judgment.rows, "train"), embedder.encode)
    judges = trained_set(fitted, thresholds={**thresholds, STRIP_KEEP.key: keep, SUPPORT_PARTIALLY.key: lo,
                                             SUPPORT_FULLY.key: hi, **keeps},
                         thresholds_by_corpus=by_corpus, embedder=embedder)
    log_step("measuring on dev")
    figures = measure_dev(judges, dev_q, adv, popqa_kb, adversarial_kb, embedder, web)
    figures["train_rows"] = {j.name: len(p) for j, p in ((PASSAGE, passage_pairs), (STRIP, strip_pairs),
                                                         (SUPPORT, support_pairs))}
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return replace(judges, figures=figures)


def _popqa_passage_figures(judges: JudgeSet, dev_q, popqa_kb) -> dict:
    """PopQA dev passage figures: AUC and the "any top-3 relevant" accuracy, beside plain cosine's."""
    t = judges.thresholds
    pop = jd.popqa_passage_pairs(dev_q, popqa_kb)
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


def _adversarial_passage_figures(judges: JudgeSet, adv, adversarial_kb, embedder) -> dict:
    """Adversarial dev figures: action accuracy and confusion on the queries, band accuracy and AUC on the grading
    rows."""
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


def _strip_figures(judges: JudgeSet, dev_q, adv, popqa_kb, embedder, web=None) -> tuple[dict, dict]:
    """``(PopQA dev strip figures, adversarial dev strip figures)``: AUC and F1 at the keep threshold."""
    pop_strips = jd.popqa_strip_pairs(dev_q, popqa_kb, embedder)
    pop_strip_scores = pair_scores(judges, STRIP, pop_strips)
    popqa = {"strips": len(pop_strips), "strip_auc": auc(pop_strips.labels, pop_strip_scores),
             "strip_f1": f1(pop_strips.labels, pop_strip_scores >= judges.threshold(STRIP_KEEP))}
    if web is not None:  # the web pages' strips, labeled as in training
        web_strips = jd.popqa_web_strip_pairs(dev_q, web, embedder)
        web_scores = pair_scores(judges, STRIP, web_strips)
        popqa.update({
            "web_strips": len(web_strips), "web_strip_auc": auc(web_strips.labels, web_scores),
            "web_strip_f1": f1(web_strips.labels, web_scores >= judges.threshold(STRIP_KEEP))})
    strips = jd.adversarial_strip_pairs(adv[STRIP.rows]["dev"], embedder)
    strip_scores = pair_scores(judges, STRIP, strips)
    return popqa, {"strips": len(strips), "f1": f1(strips.labels, strip_scores >= judges.threshold(STRIP_KEEP)),
                   "auc": auc(strips.labels, strip_scores)}


def _support_figures(judges: JudgeSet, dev_q, adv, popqa_kb, embedder) -> tuple[dict, dict]:
    """``(adversarial dev support figures, PopQA dev claim figures)``, beside word overlap's."""
    support = jd.support_rows_pairs(adv[SUPPORT.rows]["dev"], embedder)
    support_scores = pair_scores(judges, SUPPORT, support)
    lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in support.dense])
    support_dev = {
        "rows": len(support),
        "verdict_accuracy": support_accuracy(support.targets, support_scores, judges.threshold(SUPPORT_PARTIALLY),
                                             judges.threshold(SUPPORT_FULLY)),
        "word_overlap_accuracy": round(float((lexical == np.asarray(support.targets)).mean()), 4),
        "auc_fully": auc(support.labels, support_scores)}
    claims = jd.popqa_support_pairs(dev_q, popqa_kb, embedder)
    claim_scores = pair_scores(judges, SUPPORT, claims)
    claim_lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in claims.dense])
    supported = np.asarray(claims.labels, bool)
    # as the self-check decides: word overlap's "fully" stands, else the judge's score
    kept = (claim_lexical == 1.0) | (claim_scores >= judges.threshold(SUPPORT_PARTIALLY))
    return support_dev, {
        "claims": len(claims), "supported": int(supported.sum()),
        "kept_accuracy": round(float((kept == supported).mean()), 4),
        "word_overlap_kept_accuracy": round(float(((claim_lexical > 0) == supported).mean()), 4),
        "auc": auc(claims.labels, claim_scores)}


def measure_dev(judges: JudgeSet, dev_q, adv, popqa_kb, adversarial_kb, embedder, web=None) -> dict:
    """The trained judges' dev figures: PopQA dev passage AUC and the "any top-3 relevant"
    decision (with plain cosine's for comparison), PopQA dev strip AUC and F1 (every answering
    strip of the top-3 passages and up to 4 others per question, as in training), adversarial
    dev action accuracy on the queries and band accuracy on the grading rows, strip F1, support
    verdict accuracy."""
    figures: dict = {}
    figures["popqa_dev"] = _popqa_passage_figures(judges, dev_q, popqa_kb)
    figures["adversarial_dev"] = _adversarial_passage_figures(judges, adv, adversarial_kb, embedder)
    popqa_strips, figures["strips_dev"] = _strip_figures(judges, dev_q, adv, popqa_kb, embedder, web)
    figures["popqa_dev"].update(popqa_strips)
    figures["support_dev"], figures["popqa_support_dev"] = _support_figures(judges, dev_q, adv, popqa_kb, embedder)
    return figures


def confusion(expected: dict, predicted: dict) -> dict:
    """``expected action -> predicted action -> count`` over the questions of ``expected``."""
    table: dict = {}
    for q, a in expected.items():
        table.setdefault(a, {}).setdefault(predicted[q], 0)
        table[a][predicted[q]] += 1
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optimize.training.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder to save judges.json into (default: only print)")
    args = parser.parse_args(argv)

    judges = train_judges(resources.knowledge_base(), resources.knowledge_base(KB_DIR), resources.embedder())
    print(json.dumps({"thresholds": judges.thresholds, "figures": judges.figures}, indent=2))
    if args.out:
        print(f"saved {save_judges(judges, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
