"""Train the small judges, calibrate their thresholds on ``train``, report them on ``dev``.

``python -m program.judges.train [--out compiled]`` runs this step alone; ``python -m
optimize.compile`` runs it before compiling the prompts. Seeded, from the repository alone:
PopQA ``train`` questions and knowledge base, the adversarial set's ``train`` rows, and
synthetic support pairs made from PopQA ``train`` documents, and claims made from PopQA
``train`` questions' own strips (``program.judges.pairs``).

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
import itertools
import json
import sys
import time
from dataclasses import replace

import numpy as np

from eval_sets import adversarial
from eval_sets.adversarial import KB_DIR
from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions, read_jsonl
from program.app import resources
from program.app.resources import web_backend
from program.judges import JudgeChoice, JudgeSet, LinearJudge, save_judges
from program.judges import pairs as jd
from program.judges.judgments import PASSAGE, STRIP, SUPPORT, TRAINED, Judgment
from program.judges.store import corpus_key

GRID = [round(float(x), 2) for x in np.arange(0.05, 1.0, 0.05)]
LABELED_SUPPORT_WEIGHT = 10.0
POPQA_CLAIM_WEIGHT = 3.0
SEED = 0


def fit_judge(judgment: Judgment, pairs: jd.Pairs, c=1.0, weights: np.ndarray | None = None) -> LinearJudge:
    """``judgment``'s trained judge, fitted on ``pairs`` (its features, cue pairs when the pairs
    have them, 0/1 labels; ``weights`` per row, default equal).

    Raises:
        ValueError: a single label class, or mismatched lengths (``LinearJudge.fit``)."""
    dense, labels = pairs.arrays()
    return LinearJudge.fit(judgment.name, list(judgment.feature_names), dense, labels, pairs.cues, c=c,
                           sample_weight=weights, seed=SEED)


def trained_set(fitted: dict[Judgment, LinearJudge], **fields) -> JudgeSet:
    """A ``JudgeSet`` of the ``fitted`` judges, each deciding its judgment (``JudgeChoice("trained")``)
    until the compile measures otherwise; ``fields``: the rest of ``JudgeSet``'s (thresholds, ...)."""
    return JudgeSet({j.name: judge for j, judge in fitted.items()},
                    choices={j.name: JudgeChoice("trained") for j in fitted}, **fields)


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


def pair_scores(judges: JudgeSet, judgment: Judgment, pairs: jd.Pairs) -> np.ndarray:
    """``judgment``'s trained scores in [0, 1] for already-featurised ``pairs`` (one per row)."""
    judge = judges.judges[judgment.name]
    cues = pairs.cues if pairs.cues is not None else [None] * len(pairs)
    return np.array([judge.score(d, c) for d, c in zip(pairs.dense, cues)])


def out_of_fold(judgment: Judgment, pairs: jd.Pairs, folds: int = 5, c=1.0,
                weights: np.ndarray | None = None) -> np.ndarray:
    """Scores of each training row from a judge trained on the other folds (grouped by question)."""
    name, names = judgment.name, list(judgment.feature_names)
    groups = sorted(set(pairs.groups))
    fold_of = {g: i % folds for i, g in enumerate(np.random.default_rng(SEED).permutation(groups))}
    scores = np.zeros(len(pairs))
    dense, labels = pairs.arrays()
    for f in range(folds):
        test = np.array([fold_of[g] == f for g in pairs.groups])
        if test.all() or not test.any() or len(set(labels[~test])) < 2:
            continue
        cues = [c_ for c_, t in zip(pairs.cues, test) if not t] if pairs.cues is not None else None
        judge = LinearJudge.fit(name, names, dense[~test], labels[~test], cues, c=c, seed=SEED,
                                sample_weight=None if weights is None else weights[~test])
        for i in np.flatnonzero(test):
            scores[i] = judge.score(dense[i], pairs.cues[i] if pairs.cues is not None else None)
    return scores


def auc(labels, scores) -> float:
    """ROC AUC of ``scores`` (floats) against ``labels`` (0/1), 4 digits; NaN with one class only."""
    from sklearn.metrics import roc_auc_score  # why: sklearn loads only when a figure is measured

    return round(float(roc_auc_score(labels, scores)), 4) if len(set(labels)) == 2 else float("nan")


def f1(labels, kept) -> float:
    labels, kept = np.asarray(labels, bool), np.asarray(kept, bool)
    tp = (labels & kept).sum()
    return round(float(2 * tp / (labels.sum() + kept.sum())), 4) if labels.sum() + kept.sum() else 1.0


def action_of(best: float, lower: float, upper: float) -> str:
    return "correct" if best >= upper else "incorrect" if best < lower else "ambiguous"


def question_best(groups, scores) -> dict:
    best: dict = {}
    for g, s in zip(groups, scores):
        best[g] = max(best.get(g, 0.0), float(s))
    return best


def calibrate_actions(best: dict, expected: dict) -> dict:
    """Grid-search ``(lower, upper)`` for the best action accuracy of ``best`` (question ->
    highest top-3 score) against ``expected`` (question -> correct | ambiguous | incorrect);
    ties go to the narrower band."""

    def accuracy(lower, upper):
        return float(np.mean([action_of(best.get(q, 0.0), lower, upper) == a for q, a in expected.items()]))

    lower, upper = max(((lo, up) for lo, up in itertools.product(GRID, GRID) if lo <= up),
                       key=lambda p: (round(accuracy(*p), 4), -abs(p[1] - p[0])))
    return {"lower": lower, "upper": upper, "train_action_accuracy": round(accuracy(lower, upper), 4),
            "train_questions": len(expected)}


def popqa_expected(groups, labels, scores, recall: float = 0.95) -> tuple[dict, dict, float]:
    """PopQA's action labels from passage labels: ``correct`` when a top-3 passage is
    relevant, else ``incorrect`` (PopQA has no ambiguous label). Also the ``lower`` bound
    that keeps ``recall`` of the relevant passages usable (score >= lower).

    Returns ``(best score per question, expected action per question, lower)``."""
    top3 = [i < 3 for g in _runs(groups) for i in range(g)]
    best, relevant = {}, {}
    for g, label, score, top in zip(groups, labels, scores, top3):
        if top:
            best[g] = max(best.get(g, 0.0), float(score))
            relevant[g] = relevant.get(g, False) or bool(label)
    positives = sorted(float(s) for s, label in zip(scores, labels) if label)
    lower = max([t for t in GRID if np.mean([p >= t for p in positives]) >= recall] or [GRID[0]])
    return best, {g: "correct" if r else "incorrect" for g, r in relevant.items()}, lower


def calibrate_support(targets, scores) -> tuple[float, float, float]:
    """``(partially, fully, accuracy)`` thresholds for the best three-way verdict accuracy."""
    targets = np.asarray(targets)
    best = (0.35, 0.5, -1.0)
    for lo, hi in itertools.product(GRID, GRID):
        if lo > hi:
            continue
        verdicts = np.where(scores >= hi, 1.0, np.where(scores >= lo, 0.5, 0.0))
        acc = float((verdicts == targets).mean())
        if acc > best[2]:
            best = (lo, hi, acc)
    return best


def support_accuracy(targets, scores, lo, hi) -> float:
    verdicts = np.where(np.asarray(scores) >= hi, 1.0, np.where(np.asarray(scores) >= lo, 0.5, 0.0))
    return round(float((verdicts == np.asarray(targets)).mean()), 4)


def calibrate_support_sets(targets, scores, popqa_labels, popqa_scores) -> tuple[float, float, float]:
    """``(partially, fully, mean accuracy)`` for the best mean of two figures: the labeled
    rows' three-way verdict accuracy (``targets`` 1 / 0.5 / 0) and the PopQA claims' kept
    accuracy (``popqa_labels`` 0/1; a claim is kept at ``partially`` or above). Calibrating on
    the labeled rows alone set ``partially`` where it passed wrong PopQA answers."""
    popqa_labels, popqa_scores = np.asarray(popqa_labels, bool), np.asarray(popqa_scores)
    best = (0.35, 0.5, -1.0)
    for lo, hi in itertools.product(GRID, GRID):
        if lo > hi:
            continue
        mean = (support_accuracy(targets, scores, lo, hi) + float(((popqa_scores >= lo) == popqa_labels).mean())) / 2
        if mean > best[2] + 1e-9:
            best = (lo, hi, round(mean, 4))
    return best


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
            fitted[judgment], keeps[f"{judgment.name}_keep"] = fit_from_rows(
                judgment, adversarial.load_rows(judgment.rows, "train"), embedder.encode)
    judges = trained_set(fitted, thresholds={**thresholds, "strip_keep": keep, "support_partially": lo,
                                             "support_fully": hi, **keeps},
                         thresholds_by_corpus=by_corpus, embedder=embedder)
    log_step("measuring on dev")
    figures = measure_dev(judges, dev_q, adv, popqa_kb, adversarial_kb, embedder, web)
    figures["train_rows"] = {j.name: len(p) for j, p in ((PASSAGE, passage_pairs), (STRIP, strip_pairs),
                                                         (SUPPORT, support_pairs))}
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return replace(judges, figures=figures)


def _runs(groups: list[str]) -> list[int]:
    """Lengths of the runs of equal consecutive group ids (one run per question)."""
    return [len(list(g)) for _, g in itertools.groupby(groups)]


def _popqa_passage_figures(judges: JudgeSet, dev_q, popqa_kb) -> dict:
    """PopQA dev passage figures: AUC and the "any top-3 relevant" accuracy, beside plain cosine's."""
    t = judges.thresholds
    pop = jd.popqa_passage_pairs(dev_q, popqa_kb)
    scores = pair_scores(judges, PASSAGE, pop)
    cosine = np.array([d[0] for d in pop.dense])
    top3 = np.array([i < 3 for g in _runs(pop.groups) for i in range(g)])
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
    top3 = [i < 3 for g in _runs(adv_pairs.groups) for i in range(g)]
    best_adv = question_best([g for g, k in zip(adv_pairs.groups, top3) if k],
                             [s for s, k in zip(adv_scores, top3) if k])
    expected = {r["id"]: r["expected_action"] for r in adv["queries"]["dev"] if r.get("needs_retrieval", True)}
    ta = judges.thresholds_for(adversarial_kb)  # calibrated on the adversarial train queries
    predicted = {q: action_of(best_adv.get(q, 0.0), ta["lower"], ta["upper"]) for q in expected}
    grading = jd.adversarial_passage_pairs(adv[PASSAGE.rows]["dev"], [], adversarial_kb, embedder)
    grade_scores = pair_scores(judges, PASSAGE, grading)
    bands = [action_of(r, 0.2, 0.6) for r in grading.targets]  # relevance label -> band, as the LM's metric
    return {
        "queries": len(expected),
        "action_accuracy": round(float(np.mean([predicted[q] == expected[q] for q in expected])), 4),
        "confusion": _confusion(expected, predicted),
        "thresholds": {"lower": ta["lower"], "upper": ta["upper"]},
        "grading_band_accuracy": round(float(np.mean([action_of(s, ta["lower"], ta["upper"]) == b
                                                       for s, b in zip(grade_scores, bands)])), 4),
        "grading_auc": auc(grading.labels, grade_scores)}


def _strip_figures(judges: JudgeSet, dev_q, adv, popqa_kb, embedder, web=None) -> tuple[dict, dict]:
    """``(PopQA dev strip figures, adversarial dev strip figures)``: AUC and F1 at the keep threshold."""
    t = judges.thresholds
    pop_strips = jd.popqa_strip_pairs(dev_q, popqa_kb, embedder)
    pop_strip_scores = pair_scores(judges, STRIP, pop_strips)
    popqa = {"strips": len(pop_strips), "strip_auc": auc(pop_strips.labels, pop_strip_scores),
             "strip_f1": f1(pop_strips.labels, pop_strip_scores >= t["strip_keep"])}
    if web is not None:  # the web pages' strips, labeled as in training
        web_strips = jd.popqa_web_strip_pairs(dev_q, web, embedder)
        web_scores = pair_scores(judges, STRIP, web_strips)
        popqa.update({
            "web_strips": len(web_strips), "web_strip_auc": auc(web_strips.labels, web_scores),
            "web_strip_f1": f1(web_strips.labels, web_scores >= t["strip_keep"])})
    strips = jd.adversarial_strip_pairs(adv[STRIP.rows]["dev"], embedder)
    strip_scores = pair_scores(judges, STRIP, strips)
    return popqa, {"strips": len(strips), "f1": f1(strips.labels, strip_scores >= t["strip_keep"]),
                   "auc": auc(strips.labels, strip_scores)}


def _support_figures(judges: JudgeSet, dev_q, adv, popqa_kb, embedder) -> tuple[dict, dict]:
    """``(adversarial dev support figures, PopQA dev claim figures)``, beside word overlap's."""
    t = judges.thresholds
    support = jd.support_rows_pairs(adv[SUPPORT.rows]["dev"], embedder)
    support_scores = pair_scores(judges, SUPPORT, support)
    lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in support.dense])
    support_dev = {
        "rows": len(support),
        "verdict_accuracy": support_accuracy(support.targets, support_scores, t["support_partially"],
                                             t["support_fully"]),
        "word_overlap_accuracy": round(float((lexical == np.asarray(support.targets)).mean()), 4),
        "auc_fully": auc(support.labels, support_scores)}
    claims = jd.popqa_support_pairs(dev_q, popqa_kb, embedder)
    claim_scores = pair_scores(judges, SUPPORT, claims)
    claim_lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in claims.dense])
    supported = np.asarray(claims.labels, bool)
    # as the self-check decides: word overlap's "fully" stands, else the judge's score
    kept = (claim_lexical == 1.0) | (claim_scores >= t["support_partially"])
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


def _confusion(expected: dict, predicted: dict) -> dict:
    table: dict = {}
    for q, a in expected.items():
        table.setdefault(a, {}).setdefault(predicted[q], 0)
        table[a][predicted[q]] += 1
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m program.judges.train", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="folder to save judges.json into (default: only print)")
    args = parser.parse_args(argv)

    judges = train_judges(resources.knowledge_base(), resources.knowledge_base(KB_DIR), resources.embedder())
    print(json.dumps({"thresholds": judges.thresholds, "figures": judges.figures}, indent=2))
    if args.out:
        print(f"saved {save_judges(judges, args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
