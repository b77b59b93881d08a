"""Strip relevance's training slice (CRAG §4.4): its judge fit on PopQA's knowledge-base and web
strips and the adversarial ``train`` strips, its keep threshold the best out-of-fold F1's, its dev
figures and its candidates' measure."""

from __future__ import annotations

from optimize import predictor_metrics as pm
from optimize.judgments.base import Fitted, JudgmentTraining, TrainingData
from optimize.training import pairs as jd
from program.adaptation.calibrate import auc, f1
from program.adaptation.fit import fit_judge, out_of_fold, pair_scores
from program.judges import JudgeChoice, JudgeSet
from program.judgments import STRIP
from program.judgments.strip import fit_thresholds, kept, keep_threshold
from program.types import Passage, Strip


def fit(data: TrainingData) -> Fitted:
    """The strip judge and its keep threshold (the best out-of-fold F1's), from the train splits."""
    strip_pairs = (jd.popqa_strip_pairs(data.train_q, data.popqa_kb, data.embedder)
                   .extend(jd.popqa_web_strip_pairs(data.train_q, data.web, data.embedder))
                   .extend(jd.adversarial_strip_pairs(data.adv[STRIP.rows]["train"], data.embedder)))
    strip = fit_judge(STRIP, strip_pairs)
    return Fitted(strip, strip_pairs, fit_thresholds(strip_pairs.labels, out_of_fold(STRIP, strip_pairs)).saved())


def dev_figures(judges: JudgeSet, data: TrainingData) -> dict:
    """PopQA dev strip AUC and F1 at the keep threshold (knowledge-base strips, and the web
    snapshot's when there is one), and the adversarial dev strips' F1 and AUC."""
    pop_strips = jd.popqa_strip_pairs(data.dev_q, data.popqa_kb, data.embedder)
    pop_strip_scores = pair_scores(judges, STRIP, pop_strips)
    popqa = {"strips": len(pop_strips), "strip_auc": auc(pop_strips.labels, pop_strip_scores),
             "strip_f1": f1(pop_strips.labels, kept(judges, pop_strip_scores))}
    if data.web is not None:  # the web pages' strips, labeled as in training
        web_strips = jd.popqa_web_strip_pairs(data.dev_q, data.web, data.embedder)
        web_scores = pair_scores(judges, STRIP, web_strips)
        popqa.update({"web_strips": len(web_strips), "web_strip_auc": auc(web_strips.labels, web_scores),
                      "web_strip_f1": f1(web_strips.labels, kept(judges, web_scores))})
    strips = jd.adversarial_strip_pairs(data.adv[STRIP.rows]["dev"], data.embedder)
    strip_scores = pair_scores(judges, STRIP, strips)
    return {"popqa_dev": popqa, "strips_dev": {"strips": len(strips), "auc": auc(strips.labels, strip_scores),
                                               "f1": f1(strips.labels, kept(judges, strip_scores))}}


def candidates(judges: JudgeSet, rows, thresholds: dict | None = None, set_name: str = "") -> dict:
    """``{"lm", "trained", "cascade"}`` -> F1 of kept strips on StripRelevance's dev rows."""
    keep = keep_threshold(judges)
    chosen = {"lm": [], "trained": [], "cascade": []}
    labels = []
    for example, pred, _ in rows:
        context = getattr(example, "context", None) or example.strip
        strip = Strip("row", 0, example.strip)
        vectors = judges._encode([example.question, context])
        passage = Passage("row", context, score=float(vectors[1] @ vectors[0]))  # as in training
        score = judges.score(STRIP, question=example.question, strips=[strip], passages=[passage])[0]
        lm_kept = pred is not None and pm.kept_strip(example, pred)
        chosen["lm"].append(lm_kept)
        chosen["trained"].append(score >= keep)
        chosen["cascade"].append(lm_kept if JudgeChoice("cascade").asks_lm(score) else score >= keep)
        labels.append(bool(example.relevant))
    return {k: f1(labels, v) for k, v in chosen.items()}


TRAINING = JudgmentTraining(STRIP, pm.strip_accuracy, pm.strip_figures, candidates, fit, dev_figures,
                            extra_labeled=2)
