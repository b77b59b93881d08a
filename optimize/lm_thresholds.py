"""Calibrate the evaluator's thresholds on the LM's passage scores, per knowledge base (CRAG §4.3).

Where the compile chose the LM to grade passages (the help centre: ``JudgeSet.choices_by_corpus``),
its grade is read as a score from token probabilities (``program.stages.evaluator.grade_probabilities``:
``0.6 * p(answers) + 0.4 * p(same entity)``), not from the two sampled words. Asked for words,
the embedded 1.5B model said "yes" to nearly every help-centre passage, and the evaluator said
CORRECT to 20 of 22, 6 of 6 ambiguous and 10 of 10 incorrect test queries. Its probabilities
still rank the queries, so the upper and lower thresholds are calibrated on them: the top-3
knowledge-base passages of the knowledge base's ``train`` queries are graded, and
``(lower, upper)`` is the grid pair with the best action accuracy there (ties: the narrower
band); the dev queries' action accuracy and confusion are reported, never used to choose.

``python -m optimize.lm_thresholds [--out compiled]`` calibrates a saved compile in place
(about 24 minutes on 2 cores with the embedded 1.5B model: 3 LM calls per query); ``python -m
optimize.compile --calibrate-lm-scores`` runs it when the LM grades the help centre's passages.
Not by default: with the embedded 1.5B model the probabilities rank the queries far better than
the words (dev AUC .76 against .51) but gave the same dev action accuracy (61.0 %). The thresholds are
saved in the manifest under ``lm_thresholds_by_corpus`` (``corpus_key`` -> thresholds) and
``program.app.configuration.load_compiled`` applies them, with probability scores, to that knowledge base.
"""

from __future__ import annotations

import argparse
import sys
import time

import dspy

from optimize.metrics import confusion
from program.lm.options import add_lm_options, lm_from
from program.stages.decision import evaluator_action
from program.adaptation.calibrate import calibrate_actions
from program.judges.store import corpus_key
from program.stages.evaluator import LOGPROBS_CONFIG, grade_probabilities, score_grade

K = 3  # the program's top-k


def query_scores(grader, queries: list[dict], knowledge_base, max_chars: int = 700,
                 log=print) -> dict[str, dict[str, float]]:
    """Each query's highest LM passage score over its top-``K`` knowledge-base passages.

    Args:
        grader: the compiled ``GradeRetrieval`` predictor (``program.stages.evaluator.grade``).
        queries: query rows (``id``, ``question``); rows with ``needs_retrieval`` false are skipped.
        knowledge_base: ``search(question, k) -> list[Passage]``.

    Returns:
        ``{query id: {"probabilities": best score, "words": best score}}``, both in [0, 1]:
        from the token probabilities, and from the sampled words of the same calls
        (``score_grade`` of the booleans). A grade the adapter cannot parse scores 0.0, as in
        the program.
    """
    from program.lm.adapter import inputs_as_data

    best: dict[str, dict[str, float]] = {}
    asked = [q for q in queries if q.get("needs_retrieval", True)]
    started = time.perf_counter()
    for i, q in enumerate(asked, 1):
        scores = {"probabilities": [0.0], "words": [0.0]}
        for passage in knowledge_base.search(q["question"], K):
            try:
                with inputs_as_data():
                    pred = grader(question=q["question"], passage=passage.text[:max_chars], config=LOGPROBS_CONFIG)
                scores["probabilities"].append(score_grade(*grade_probabilities(pred))[0])
                scores["words"].append(score_grade(pred.same_entity, pred.answers_question, pred.outdated)[0])
            except Exception:  # unparsed output grades the passage irrelevant, as in the program
                pass
        best[q["id"]] = {k: max(v) for k, v in scores.items()}
        if i % 10 == 0 or i == len(asked):
            log(f"  LM passage scores: {i}/{len(asked)} queries ({time.perf_counter() - started:.0f} s)")
    return best


def _separation(best: dict[str, float], expected: dict[str, str]) -> float:
    """ROC AUC of the best score between queries expected CORRECT and INCORRECT."""
    from program.adaptation.calibrate import auc

    ids = [q for q in best if expected[q] in ("correct", "incorrect")]
    return auc([expected[q] == "correct" for q in ids], [best[q] for q in ids])


def calibrate_lm_thresholds(grader, knowledge_base, train: list[dict], dev: list[dict], log=print) -> dict:
    """``lower`` / ``upper`` for the LM's probability scores, calibrated on ``train`` queries'
    expected actions, with the dev figures, and the sampled words' figures for comparison.

    Returns:
        ``{"lower", "upper", "score": "token probabilities", "train_action_accuracy",
        "train_questions", "dev_action_accuracy", "dev_questions", "dev_confusion",
        "dev_auc", "words": {...}}``. Confusion: expected action -> predicted action -> count;
        ``dev_auc``: ROC AUC of the query's best score between CORRECT and INCORRECT queries;
        ``words``: the same figures for the sampled words' scores, read through the fixed
        bands ``program.app.compiled.LM_THRESHOLDS`` and through thresholds calibrated the same way.
    """
    from program.app.compiled import LM_THRESHOLDS

    expected = {q["id"]: q["expected_action"] for q in train + dev if q.get("needs_retrieval", True)}
    train_best = query_scores(grader, train, knowledge_base, log=log)
    dev_best = query_scores(grader, dev, knowledge_base, log=log)

    def figures(kind: str) -> dict:
        train_scores = {q: s[kind] for q, s in train_best.items()}
        dev_scores = {q: s[kind] for q, s in dev_best.items()}
        chosen = calibrate_actions(train_scores, {q: expected[q] for q in train_scores})
        predicted = {q: evaluator_action(s, chosen["lower"], chosen["upper"]) for q, s in dev_scores.items()}
        right = sum(predicted[q] == expected[q] for q in dev_scores)
        return {**chosen, "dev_questions": len(dev_scores),
                "dev_action_accuracy": round(right / max(1, len(dev_scores)), 4),
                "dev_confusion": confusion({q: expected[q] for q in dev_scores}, predicted),
                "dev_auc": _separation(dev_scores, expected)}

    words = figures("words")
    bands = LM_THRESHOLDS["lower"], LM_THRESHOLDS["upper"]
    fixed = {q: evaluator_action(s["words"], *bands) for q, s in dev_best.items()}
    words["dev_action_accuracy_fixed_bands"] = round(sum(fixed[q] == expected[q] for q in fixed)
                                                     / max(1, len(fixed)), 4)
    return {**figures("probabilities"), "score": "token probabilities", "words": words}


def help_centre_thresholds(grader, knowledge_base, log=print) -> dict:
    """``{corpus_key: thresholds}`` for the adversarial help centre, from its train and dev queries."""
    from eval_sets import adversarial

    figures = calibrate_lm_thresholds(grader, knowledge_base, adversarial.load_rows("queries", "train"),
                                      adversarial.load_rows("queries", "dev"), log=log)
    return {corpus_key(knowledge_base): {"name": "adversarial", **figures}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m optimize.lm_thresholds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="compiled", help="the saved compile to recalibrate (default: compiled)")
    add_lm_options(parser, role="the compile's LM", cache=False)
    args = parser.parse_args(argv)
    from eval_sets import adversarial
    from program.app.compiled import STATE_FILE, has_compiled, load_state, read_manifest, save_compiled
    from program.app.resources import knowledge_base
    from program.lm.configure import model_name
    from program.stages.crag import CRAG

    if not has_compiled(args.out):
        print(f"error: no compiled program in {args.out}; run: python -m optimize.compile --out DIR", file=sys.stderr)
        return 2
    manifest = read_manifest(args.out)
    lm = lm_from(args)
    if manifest.get("lm") != model_name(lm):
        print(f"error: {args.out} was compiled for {manifest.get('lm')}, not {model_name(lm)}", file=sys.stderr)
        return 2
    program = CRAG(knowledge_base=None, decide_retrieval=True)
    load_state(program, f"{args.out}/{STATE_FILE}")
    with dspy.context(lm=lm.copy(temperature=0.0)):
        by_corpus = help_centre_thresholds(program.evaluator.grade, knowledge_base(adversarial.KB_DIR))
    for key, t in by_corpus.items():
        print(f"{t['name']} ({key}): lower={t['lower']} upper={t['upper']}; action accuracy "
              f"train {t['train_action_accuracy']:.3f} ({t['train_questions']} queries), "
              f"dev {t['dev_action_accuracy']:.3f} ({t['dev_questions']}), dev AUC {t['dev_auc']}; "
              f"dev confusion {t['dev_confusion']}")
        w = t["words"]
        print(f"  the sampled words instead: dev action accuracy {w['dev_action_accuracy_fixed_bands']:.3f} at the "
              f"fixed bands, {w['dev_action_accuracy']:.3f} calibrated ({w['lower']}/{w['upper']}), "
              f"dev AUC {w['dev_auc']}")
    save_compiled(program, {**manifest, "lm_thresholds_by_corpus": by_corpus}, args.out)
    print(f"saved to {args.out}/manifest.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
