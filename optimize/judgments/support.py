"""Claim support's training slice (Self-RAG's IsSup, MiniCheck): its judge fit on synthetic claims
from PopQA ``train`` documents, PopQA ``train`` claims and the hand-labeled ``support`` rows, its
*partially* / *fully* thresholds, its dev figures and its candidates' measure."""

from __future__ import annotations

import numpy as np

from eval_sets.popqa import KNOWLEDGE_BASE_PATH, read_jsonl
from optimize import predictor_metrics as pm
from optimize.judgments.base import Fitted, JudgmentTraining, TrainingData
from optimize.training import pairs as jd
from program.adaptation.calibrate import auc
from program.adaptation.fit import LABELED_SUPPORT_WEIGHT, POPQA_CLAIM_WEIGHT, fit_judge, out_of_fold, pair_scores
from program.judges import JudgeChoice, JudgeSet
from program.judgments import CANDIDATES, SUPPORT
from program.judgments.support import accuracy, fit_thresholds_sets, kept
from program.stages.selfcheck import decide_support


def fit(data: TrainingData) -> Fitted:
    """The support judge and its thresholds, from synthetic pairs (PopQA ``train`` documents),
    PopQA claim pairs and the labeled ``train`` rows; the thresholds for the best mean of the
    labeled rows' verdict accuracy and the PopQA claims' kept accuracy, out of fold."""
    docs = {r["doc_id"]: r["text"] for r in read_jsonl(KNOWLEDGE_BASE_PATH)}
    train_docs = [(q["id"], docs[q["id"].replace("popqa-", "kb-")]) for q in data.train_q
                  if q["id"].replace("popqa-", "kb-") in docs]
    synthetic = jd.synthetic_support_pairs(train_docs, data.embedder)
    claims = jd.popqa_support_pairs(data.train_q, data.popqa_kb, data.embedder)
    support_pairs = (jd.Pairs(cues=None).extend(synthetic).extend(claims)
                     .extend(jd.support_rows_pairs(data.adv[SUPPORT.rows]["train"], data.embedder)))
    # the hand-labeled rows weigh as much as the synthetic ones together (paraphrase, partial
    # support); the PopQA claims, answers as the generator states them, in between
    weights = np.array([1.0] * len(synthetic) + [POPQA_CLAIM_WEIGHT] * len(claims)
                       + [LABELED_SUPPORT_WEIGHT] * (len(support_pairs) - len(synthetic) - len(claims)))
    support = fit_judge(SUPPORT, support_pairs, weights=weights)
    support_oof = out_of_fold(SUPPORT, support_pairs, weights=weights)
    labeled = [i for i, g in enumerate(support_pairs.groups) if g.startswith("support-")]
    popqa_rows = slice(len(synthetic), len(synthetic) + len(claims))
    thresholds, _ = fit_thresholds_sets(np.asarray(support_pairs.targets)[labeled], support_oof[labeled],
                                        claims.labels, support_oof[popqa_rows])
    return Fitted(support, support_pairs, thresholds.saved())


def dev_figures(judges: JudgeSet, data: TrainingData) -> dict:
    """The adversarial dev support rows' verdict accuracy and AUC, and PopQA dev claims' kept
    accuracy and AUC, each beside word overlap's."""
    support = jd.support_rows_pairs(data.adv[SUPPORT.rows]["dev"], data.embedder)
    support_scores = pair_scores(judges, SUPPORT, support)
    lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in support.dense])
    support_dev = {
        "rows": len(support), "verdict_accuracy": accuracy(judges, support.targets, support_scores),
        "word_overlap_accuracy": round(float((lexical == np.asarray(support.targets)).mean()), 4),
        "auc_fully": auc(support.labels, support_scores)}
    claims = jd.popqa_support_pairs(data.dev_q, data.popqa_kb, data.embedder)
    claim_scores = pair_scores(judges, SUPPORT, claims)
    claim_lexical = np.array([d[SUPPORT.feature_names.index("lexical_verdict")] for d in claims.dense])
    supported = np.asarray(claims.labels, bool)
    # as the self-check decides: word overlap's "fully" stands, else the judge's score
    claims_kept = (claim_lexical == 1.0) | kept(judges, claim_scores)
    return {"support_dev": support_dev, "popqa_support_dev": {
        "claims": len(claims), "supported": int(supported.sum()),
        "kept_accuracy": round(float((claims_kept == supported).mean()), 4),
        "word_overlap_kept_accuracy": round(float(((claim_lexical > 0) == supported).mean()), 4),
        "auc": auc(claims.labels, claim_scores)}}


def candidates(judges: JudgeSet, rows, thresholds: dict | None = None, set_name: str = "",
               kept_only: bool | None = None) -> dict:
    """``{"lm", "trained", "cascade"}`` -> verdict accuracy on CheckClaimSupport's dev rows.

    Each candidate decides by the program's own rule (``program.stages.selfcheck.decide_support``),
    the LM's reply being the row's saved prediction: word overlap's ``fully`` stands, and each
    verdict is the better of word overlap's and the judge's (or the quote's). ``kept_only``
    (default: ``set_name == "popqa"``): right when the claim is kept (``partially`` or
    ``fully``) exactly when its label supports it, for rows labeled only ``fully`` / ``no``
    (PopQA's claims)."""
    kept_only = set_name == "popqa" if kept_only is None else kept_only
    right = {c: [] for c in CANDIDATES}
    for example, pred, _ in rows:
        question = getattr(example, "question", None) or ""  # PopQA's claims know their question
        saved = str(getattr(pred, "quote", "") or "") if pred is not None else ""
        for name in CANDIDATES:
            verdict = decide_support(example.claim, example.evidence, question, judges,
                                     quote=lambda claim, evidence: saved, choice=JudgeChoice(name)).verdict
            right[name].append((verdict != "no") == (example.support != "no") if kept_only
                               else verdict == example.support)
    return {k: round(float(np.mean(v)), 4) if v else 0.0 for k, v in right.items()}


TRAINING = JudgmentTraining(SUPPORT, pm.support_accuracy, pm.support_figures, candidates, fit, dev_figures)
