"""``python -m optimize.compile``: compile every CRAG predictor against its labeled data, calibrate, save.

Each predictor is optimised on its own labeled examples from ``eval_sets/adversarial`` with
its own metric (``optimize.predictor_metrics``), measured on the dev split before and after;
a compiled predictor that is worse on dev than the uncompiled one is not kept. The
evaluator's thresholds are then calibrated on the grading train split (grid search for the
best action accuracy) and reported on dev. With ``--calibrate-lm-scores``, where the LM grades
the help centre's passages, its token-probability scores get thresholds of their own,
calibrated on that knowledge base's train queries (``optimize.lm_thresholds``; 24 of a fresh
compile's 50 minutes on 2 cores, and no dev action gained with the embedded 1.5B model, so the
default compile leaves the LM's sampled words on their fixed bands). The program's DSPy JSON
state and a manifest go to ``compiled/`` (``program.app.compiled.save_compiled``).

``--kb PATH_OR_URL`` adapts the trained judges to that knowledge base from its own documents
instead (``program.adaptation.adapt``), saved under ``compiled/adapted/``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import random
import sys
import time
from dataclasses import dataclass, replace
from typing import Callable
from datetime import datetime, timezone
from pathlib import Path

import dspy  # after program.lm.configure, which sets DSPy's cache folder

from eval_sets import adversarial
from optimize import predictor_metrics as pm
from optimize.continued import ContinuedCheck
from optimize.judge_choice import choose, popqa_lm_rows
from optimize.lm_thresholds import help_centre_thresholds
from optimize.training.sources import labeled_sources, sources_stamp
from optimize.judgments import JUDGES, TRAINING
from optimize.training.train import train_judges
from program.lm.options import add_lm_options
from program.stages.decision import evaluator_action
from program.adaptation.labeled import save_labeled
from program.app.compiled import (COMPILED_DIR, STATE_FILE, has_compiled, load_state, read_manifest,
                                  save_compiled)
from program.app.resources import embedder, knowledge_base
from program.judges import JudgeChoice, JudgeSet, load_judges, save_judges
from program.judgments import PASSAGE, TRAINED, predictor_of
from program.judges.store import corpus_key
from program.lm.configure import configure_lm, model_name, supports_logprobs
from program.stages.crag import CRAG
from program.stages.evaluator import score_grade
from program.stages.followup import conversation_text
from signatures import CheckClaimSupport, DecideRetrieval, GenerateAnswer

# budget -> (few-shot demos per predictor, dev rows measured per predictor; None: all).
# The dev measurements (before and after, one LM call a row) are most of a compile's calls;
# light samples them so a compile on the embedded model and 2 cores stays under 30 minutes.
BUDGETS = {"light": (2, 16), "medium": (3, 48), "heavy": (4, None)}
OPTIMIZERS = ("bootstrap", "mipro", "gepa")


@dataclass(frozen=True)
class PredictorSpec:
    """A compiled predictor: its labeled data, signature, place in CRAG (``locate(crag) ->
    dspy.Predict``, a judgment's own ``Judgment.locate``), and metric.

    ``labeled_demos`` is False when the labels are not the signature's outputs (rewrite rows
    carry expert terms, not a query), so only bootstrapped demos can teach; ``extra_labeled``
    labeled demos are added after the bootstrapped ones (bootstrapping keeps the examples the
    model already gets right, mostly strips it rightly kept; labeled ones also show NONE).
    ``threshold`` is the metric score a bootstrapped trace needs to become a demo.
    """

    kind: str
    signature: type
    locate: Callable
    metric: object
    figures: object
    labeled_demos: bool = True
    extra_labeled: int = 0
    threshold: float = 0.99


SPECS = [
    # the judgments' own predictors: their rows, Signatures and places are their runtime slices'
    # (program.judgments), their metrics and figures their training slices' (optimize.judgments)
    *(PredictorSpec(t.judgment.rows, t.judgment.signature, t.judgment.locate, t.metric, t.figures,
                    labeled_demos=t.labeled_demos, extra_labeled=t.extra_labeled, threshold=t.threshold)
      for t in TRAINING),
    # Rewards the model's own [n] markers (the citations issue): labeled demos cite (pm.cited_answer).
    PredictorSpec("answers", GenerateAnswer, lambda crag: crag.generator.generate, pm.answer_citation_metric,
                  pm.answer_figures),
    # Compiled into the state although the default program leaves the decider off, so that
    # --decide-retrieval runs a compiled decider (loading ignores state a program lacks).
    PredictorSpec("deciding", DecideRetrieval, lambda crag: crag.decider, pm.decision_accuracy, pm.decision_figures,
                  extra_labeled=2),
]
KINDS = tuple(spec.kind for spec in SPECS) + ("judges",)  # judges: the trained judges (optimize.training.train)


def _evaluate(predictor, devset, spec: PredictorSpec, knowledge_base=None) -> dict:
    """The predictor's dev figures (``spec.figures``, ``optimize.predictor_metrics``), with the
    ``(example, prediction, score)`` rows under ``"_rows"`` (for the judge choice; not saved).
    The claim check is asked as the program asks it, continuing a reader's call
    (``optimize.continued``)."""
    asked = ContinuedCheck(predictor) if spec.signature is CheckClaimSupport else predictor
    result = dspy.Evaluate(devset=devset, metric=spec.metric, num_threads=1, display_progress=True,
                           provide_traceback=False)(asked)
    return {**spec.figures(result.results, knowledge_base), "_rows": result.results}


def _optimizer(name: str, spec: PredictorSpec, demos: int, budget: str = "light"):
    labeled = demos + spec.extra_labeled if spec.labeled_demos else 0
    if name == "bootstrap":
        # bool(dspy.Prediction(score=0.0)) is True, so the threshold is what filters demos.
        return dspy.BootstrapFewShot(metric=spec.metric, metric_threshold=spec.threshold,
                                     max_bootstrapped_demos=demos, max_labeled_demos=labeled, max_rounds=1)
    if name == "mipro":
        return dspy.MIPROv2(metric=spec.metric, auto=budget, max_bootstrapped_demos=demos,
                            max_labeled_demos=labeled, num_threads=1, verbose=False)
    if name == "gepa":
        def feedback_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
            return spec.metric(gold, pred, trace)

        # GEPA rewrites the instruction by reflecting on failures; the same LM reflects.
        return dspy.GEPA(metric=feedback_metric, auto=budget, num_threads=1,
                         reflection_lm=dspy.settings.lm.copy(temperature=1.0, max_tokens=2000))
    raise ValueError(f"unknown optimizer {name!r}; choose {', '.join(OPTIMIZERS)}")


def label_span(strip: str, relevant: bool, words: int = 12) -> str:
    """StripRelevance's output for a labeled strip: its first ``words`` words when relevant,
    else ``NONE``. The copy is verbatim, so ``score_span`` scores it 1.0; it is short because
    the model imitates its demos and writes about 10 tokens a second."""
    return " ".join(strip.split()[:words]) if relevant else "NONE"


def labeled_examples(kind: str, split: str, rows: int | None = None) -> list[dspy.Example]:
    """The split's examples for one predictor, ``rows`` of them (``sample_rows``; None: all).

    A strip row (a question and its strips) is expanded to one example per strip, its label
    written as the signature's output (``label_span``) so that it can serve as a demo;
    ``rows`` then counts strip rows, not strips. Deciding examples come from the query rows
    (``decision_rows``).
    """
    if kind == "deciding":
        return decision_rows(split, rows)
    if kind == "followups":
        return followup_examples(split, rows)
    if kind == "rewrite":  # RewriteQuery reads the knowledge base's terms nearest to the question
        return pm.with_candidate_terms(sample_rows(adversarial.load_examples(kind, split), rows),
                                       pm.adversarial_knowledge_base())
    if kind == "answers":  # contexts as the program's strips (no footnotes); labels as cited answers
        return pm.with_cited_answers(sample_rows(adversarial.load_examples(kind, split), rows))
    if kind != "strips":
        return sample_rows(adversarial.load_examples(kind, split), rows)
    return [
        dspy.Example(question=row["question"], strip=strip, relevant=i in row["relevant"],
                     context=" ".join(row["strips"]),
                     answer_span=label_span(strip, i in row["relevant"])).with_inputs("question", "strip")
        for row in sample_rows(adversarial.load_rows("strips", split), rows)
        for i, strip in enumerate(row["strips"], start=1)
    ]


def followup_examples(split: str, rows: int | None = None) -> list[dspy.Example]:
    """StandaloneQuestion's examples: the conversation as the program writes it
    (``program.stages.followup.conversation_text``) and the follow-up in, the hand-written
    standalone question out; every domain's rows of ``split``."""
    from eval_sets import followups

    return [dspy.Example(conversation=conversation_text(followups.history(r)), followup=r["followup"],
                         standalone_question=r["standalone"]).with_inputs("conversation", "followup")
            for r in sample_rows(followups.load_rows(split=split), rows)]


def decision_rows(split: str, rows: int | None = None) -> list[dspy.Example]:
    """DecideRetrieval's examples (question in, ``needs_retrieval`` out) from the query rows.

    Only a handful of queries need no retrieval (8 of 161: greetings, arithmetic, rewording),
    so every one of them is kept and the rest sampled (``sample_rows``): on the train split
    as many as there are chit-chat rows, so that demos show both answers; on other splits up
    to ``rows`` in all (None: all rows).
    """
    queries = adversarial.load_rows("queries", split)
    chat = [q for q in queries if not q["needs_retrieval"]]
    need = [q for q in queries if q["needs_retrieval"]]
    n = len(chat) if split == "train" else (None if rows is None else max(0, rows - len(chat)))
    keep = {q["id"] for q in chat + sample_rows(need, n)}
    return [dspy.Example(id=q["id"], question=q["question"],
                         needs_retrieval=q["needs_retrieval"]).with_inputs("question")
            for q in queries if q["id"] in keep]


def sample_rows(rows: list, n: int | None, seed: int = 0) -> list:
    """``n`` of ``rows`` drawn with a fixed seed, in their original order; all when ``n`` is
    None or at least ``len(rows)``."""
    if n is None or n >= len(rows):
        return list(rows)
    keep = set(random.Random(seed).sample(range(len(rows)), n))
    return [row for i, row in enumerate(rows) if i in keep]


def compile_predictor(spec: PredictorSpec, optimizer: str, budget: str, knowledge_base=None,
                      dev_rows: int | None = None) -> tuple[dspy.Predict, dict]:
    """Compile one predictor; return the one to keep and its before/after dev figures.

    Args:
        dev_rows: dev rows measured (a seeded sample, ``sample_rows``); None: the budget's
            default (``BUDGETS``); 0: all.

    The compiled predictor is kept when its primary dev figure is not lower than the
    uncompiled one's (``spec.figures``).
    """
    demos, default_rows = BUDGETS[budget]
    train = labeled_examples(spec.kind, "train")
    dev = labeled_examples(spec.kind, "dev", default_rows if dev_rows is None else (dev_rows or None))
    print(f"\n== {spec.kind} ({spec.signature.__name__}): {len(train)} train, {len(dev)} dev", flush=True)
    student = dspy.Predict(spec.signature)
    before = _evaluate(student, dev, spec, knowledge_base)
    started = time.perf_counter()
    compiled = _optimizer(optimizer, spec, demos, budget).compile(student.deepcopy(), trainset=train)
    unchanged = not compiled.demos and compiled.signature.instructions == student.signature.instructions
    # at temperature 0 an unchanged predictor scores the same: skip its dev calls
    after = before if unchanged else _evaluate(compiled, dev, spec, knowledge_base)
    keep = compiled if after["primary"] >= before["primary"] else student
    kept_rows = (after if keep is compiled else before)["_rows"]
    before, after = ({k: v for k, v in d.items() if k != "_rows"} for d in (before, after))
    figures = {"before": before["primary"], "after": after["primary"],
               "kept": "compiled" if keep is compiled else "uncompiled", "demos": len(keep.demos),
               "train": len(train), "dev": len(dev), "seconds": round(time.perf_counter() - started, 1),
               "dev_before": before, "dev_after": after, "_rows": kept_rows}
    print(f"   {spec.kind}: dev {before['primary']:.3f} -> {after['primary']:.3f}, kept {figures['kept']}", flush=True)
    return keep, figures


def measure_saved(predictor, spec: PredictorSpec, budget: str, dev_rows: int | None) -> list:
    """The ``(example, prediction, score)`` dev rows of a saved predictor, measured as
    ``compile_predictor`` measures (the same seeded dev sample), without compiling it."""
    default_rows = BUDGETS[budget][1]
    dev = labeled_examples(spec.kind, "dev", default_rows if dev_rows is None else (dev_rows or None))
    print(f"\n== {spec.kind}: the saved LM predictor on {len(dev)} dev rows, for the judge choice", flush=True)
    return _evaluate(predictor, dev, spec)["_rows"]


def reusable_judges(out: str | Path, only: list[str]):
    """The judges saved in ``out`` when they need no training: not asked for (``--only``
    without ``judges``), or trained from the same data and code (``judges_data_hash``: a rerun
    reuses them). None otherwise."""
    saved = read_manifest(out) or {}
    same = saved.get("judges", {}).get("data_hash") == judges_data_hash()
    if "judges" in only and not same:
        return None
    judges = load_judges(out)
    if judges is not None and "judges" in only:
        print(f"\n== trained judges: reusing {out}/judges.json (same data and code)", flush=True)
    return judges


def measure_refinement(judges, out) -> None:
    """Whether refinement keeps the answer with newly trained ``judges``: PopQA dev's
    answering-strip recall into ``out/refinement.json`` (``optimize.refine_recall``; no LM,
    about 2 minutes), which turns reading refined strips on or off for PopQA."""
    from optimize.refine_recall import measure  # why: it loads PopQA's evaluation rows, needed only here

    measure(judges, split="dev", out=out)


def build_judges(adversarial_kb):
    """Train the judges (``optimize.training.train``) on the PopQA knowledge base and ``adversarial_kb``."""
    return train_judges(knowledge_base(), adversarial_kb, embedder())


def popqa_rows_for(program) -> dict:
    """The LM's PopQA dev rows for the judge choice (``optimize.judge_choice.popqa_lm_rows``)."""
    return popqa_lm_rows(program, knowledge_base())


def calibrate_thresholds(grader: dspy.Predict, step: float = 0.05) -> dict:
    """Grid-search (lower, upper) for the best action accuracy on the grading train split; report dev."""

    def scored(split):
        rows = []
        for ex in adversarial.load_examples("grading", split):
            try:
                out = grader(**ex.inputs())
                score, _ = score_grade(out.same_entity, out.answers_question, out.outdated)
            except Exception:
                score = 0.0
            rows.append((score, evaluator_action(float(ex.relevance), pm.LM_LOWER, pm.LM_UPPER)))
        return rows

    def accuracy(rows, lower, upper):
        return sum(evaluator_action(s, lower, upper) == band for s, band in rows) / max(1, len(rows))

    train, dev = scored("train"), scored("dev")
    grid = [round(i * step, 2) for i in range(int(1 / step) + 1)]
    # Ties go to the pair closest to the defaults (0.2, 0.6), so calibration moves only when it pays.
    lower, upper = max(
        ((lo, up) for lo, up in itertools.product(grid, grid) if 0 < lo <= up <= 1),
        key=lambda p: (accuracy(train, *p), -abs(p[0] - 0.2) - abs(p[1] - 0.6)),
    )
    return {"lower": lower, "upper": upper, "train_action_accuracy": round(accuracy(train, lower, upper), 4),
            "dev_action_accuracy": round(accuracy(dev, lower, upper), 4),
            "dev_action_accuracy_default": round(accuracy(dev, 0.2, 0.6), 4)}


def help_centre_lm_thresholds(judges, grader, kb, lm, saved: dict | None, only: list[str],
                              calibrate: bool = True) -> dict:
    """``lm_thresholds_by_corpus`` for the manifest (``optimize.lm_thresholds``): calibrated
    anew, when ``calibrate``, where the LM grades the help centre's passages and either it or
    the judge choice was recompiled; the saved compile's when neither was. Empty when the LM
    does not grade there, gives no token probabilities, or ``calibrate`` is false (a saved
    calibration belongs to the grader it was made for, so a recompiled grader drops it)."""
    if saved is not None and not {"judges", "grading"} & set(only):
        return saved.get("lm_thresholds_by_corpus", {})
    choice = judges.choices_by_corpus.get(corpus_key(kb), {}).get(PASSAGE.name)
    if choice is None or choice.use != "lm" or not supports_logprobs(lm):
        return {}
    if not calibrate:
        print("\n== the LM grades the help centre's passages: its sampled words, on the fixed bands "
              "(--calibrate-lm-scores calibrates its token-probability scores instead, about 24 minutes)", flush=True)
        return {}
    print("\n== the LM grades the help centre's passages: its thresholds, on its token-probability scores "
          "of the train queries (3 LM calls per query)", flush=True)
    return help_centre_thresholds(grader, kb)


def data_hash(root: str | Path | None = None) -> str:
    """sha256 (16 hex digits) of the labeled rows the compile reads (train and dev; test rows,
    kept for final figures, are never read, so adding some does not outdate a compile) and
    of the knowledge base they refer to. ``root``: the labeled set's folder (default: the
    adversarial set's), its knowledge base in ``root/kb``."""
    digest = hashlib.sha256()
    root = Path(root or adversarial.DATA_DIR)
    for path in sorted(root.glob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        read = "".join(line for line in lines if not line.strip() or json.loads(line).get("split") != "test")
        digest.update(path.relative_to(root).as_posix().encode() + read.encode("utf-8"))
    for path in sorted((root / "kb").rglob("*.md")):
        digest.update(path.relative_to(root).as_posix().encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def judges_data_hash() -> str:
    """sha256 (16 hex digits) of what makes the trained judges: the labeled files
    (``data_hash``), the PopQA questions, split and knowledge base, and the code that turns
    them into features, labels and weights. Equal hashes give the same judges (seeded)."""
    from eval_sets import popqa

    root = Path(__file__).resolve().parent.parent
    # features and judges, their fitting and calibration, and the compile's training
    code = [p for folder in ("program/judges", "program/adaptation", "optimize/training")
            for p in sorted((root / folder).glob("*.py"))]
    digest = hashlib.sha256(data_hash().encode())
    for path in [popqa.QUESTIONS_PATH, popqa.SPLIT_PATH, popqa.KNOWLEDGE_BASE_PATH, popqa.WEB_SNAPSHOT_PATH, *code]:
        digest.update(Path(path).name.encode() + Path(path).read_bytes())
    return digest.hexdigest()[:16]


def dev_score(manifest: dict) -> float:
    """One dev figure for a whole compile: the mean of each kept predictor's primary dev
    figure and the calibrated thresholds' dev action accuracy (all in [0, 1])."""
    kept = [m["after"] if m["kept"] == "compiled" else m["before"] for m in manifest["metrics_dev"].values()]
    figures = kept + [manifest["thresholds"]["dev_action_accuracy"]]
    return round(sum(figures) / len(figures), 4)


def may_overwrite(manifest: dict, out: str | Path, force: bool) -> tuple[bool, str]:
    """Whether the new compile may replace the one saved in ``out``, and why.

    A saved compile for the same LM, the same data and the same dev rows is replaced only
    when the new one's ``dev_score`` is at least as high, or with ``force``; a different LM,
    data set or dev sample (another budget or ``--dev-rows``) is not comparable, so it is replaced.
    """
    path = Path(out) / "manifest.json"
    if force or not path.exists():
        return True, "forced" if force else "nothing saved yet"
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        old = dev_score(saved)
    except (OSError, ValueError, KeyError, TypeError):
        return True, "the saved manifest is unreadable"
    if saved.get("lm") != manifest["lm"] or saved.get("data_hash") != manifest["data_hash"]:
        return True, "the saved compile used another LM or other data"
    if {k: m.get("dev") for k, m in saved.get("metrics_dev", {}).items()} != \
            {k: m.get("dev") for k, m in manifest["metrics_dev"].items()}:
        return True, "the saved compile was measured on other dev rows"
    new = dev_score(manifest)
    if new < old:
        return False, f"dev score {new:.4f} is below the saved compile's {old:.4f} (use --force to replace it)"
    return True, f"dev score {new:.4f} >= saved {old:.4f}"


def _parser() -> argparse.ArgumentParser:
    """The command line's parser: the compile's flags, and ``--kb``'s for adapting the judges."""
    parser = argparse.ArgumentParser(prog="python -m optimize.compile", description=__doc__.split("\n\n")[0])
    add_lm_options(parser, cache=False)  # the compile's own cache is DSPy's: its rounds repeat calls
    parser.add_argument("--optimizer", default="bootstrap", choices=OPTIMIZERS)
    parser.add_argument("--budget", default="light", choices=list(BUDGETS),
                        help="demos per predictor (2/3/4), dev rows measured per predictor (16/48/all) "
                             "and MIPROv2/GEPA's auto budget")
    parser.add_argument("--dev-rows", type=int, default=None,
                        help="dev rows measured per predictor (a seeded sample; 0: all); default: the budget's")
    parser.add_argument("--out", default=None,
                        help="the folder the compile is written to (required: --out compiled replaces the "
                             "project's committed compile); with --kb: where the adapted judges go beside "
                             "(default compiled/)")
    parser.add_argument("--force", action="store_true", help="save even when worse on dev than the saved compile")
    parser.add_argument("--calibrate-lm-scores", action="store_true",
                        help="where the LM grades the help centre's passages, calibrate thresholds on its token-"
                             "probability scores of the train queries (about 24 minutes more; optimize.lm_thresholds)")
    parser.add_argument("--only", help=f"comma-separated predictors to compile ({', '.join(KINDS)}); the others "
                                       "keep the state, figures and thresholds saved in --out")
    parser.add_argument("--kb", help="adapt the judges to this knowledge base (a corpus file or folder, or a "
                                     "postgresql:// URL) from its own documents, and save them beside --out; "
                                     "the predictors are not recompiled (program.adaptation.adapt)")
    parser.add_argument("--leave-out", default="", help="with --kb: labeled domains whose labels are not learned "
                                                        "from (comma-separated; e.g. kubernetes, to measure it)")
    parser.add_argument("--questions", type=int, default=None,
                        help="with --kb: questions the LM writes for sampled chunks (default 0: headings only)")
    parser.add_argument("--time-cap", type=float, default=None,
                        help="with --kb: seconds the LM may spend writing questions (default 900)")
    return parser


def _only(args, parser: argparse.ArgumentParser) -> list[str]:
    """The kinds to compile (``--only``; default ``KINDS``); a flag misused exits through ``parser.error``."""
    if args.leave_out or args.questions is not None or args.time_cap is not None:
        parser.error("--leave-out, --questions and --time-cap go with --kb")
    only = [k.strip() for k in args.only.split(",") if k.strip()] if args.only else list(KINDS)
    if unknown := sorted(set(only) - set(KINDS)):
        parser.error(f"--only: unknown predictor(s) {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    if args.only and not has_compiled(args.out):
        parser.error(f"--only recompiles part of a saved compile, and {args.out} holds none")
    return only


def _saved_compile(args, parser: argparse.ArgumentParser, program, lm) -> dict | None:
    """``--out``'s manifest for ``--only``, its state loaded into ``program`` (another LM or data exits); else None."""
    saved = read_manifest(args.out) if args.only else None
    if saved is not None:
        if saved.get("lm") != model_name(lm):
            parser.error(f"--only: {args.out} was compiled for {saved.get('lm')}, not {model_name(lm)}")
        if saved.get("data_hash") != data_hash():
            parser.error(f"--only: the labeled data changed since {args.out} was compiled; compile every predictor")
        load_state(program, Path(args.out) / STATE_FILE)
    return saved


def _compile_kinds(args, only: list[str], kb, judges, program, metrics: dict) -> dict:
    """Kind -> the LM's dev rows for the judge choice; compiled kinds' figures go to ``metrics``, demos to
    ``program``'s predictors."""
    lm_rows = {}
    for spec in SPECS:
        if spec.kind not in only:
            continue
        if spec.kind == "rewrite":
            spec = replace(spec, metric=pm.rewrite_metric_for(kb))
        if spec.kind == "answers":  # citations judged by the support judge the program cites with
            spec = replace(spec, metric=pm.answer_citation_metric_for(judges))
        keep, metrics[spec.kind] = compile_predictor(spec, args.optimizer, args.budget, kb, args.dev_rows)
        lm_rows[spec.kind] = metrics[spec.kind].pop("_rows")
        spec.locate(program).load_state(keep.dump_state())  # the kept demos and instructions
    if "judges" in only:
        # new judges are compared with the saved LM predictors on the same dev rows (no compiling)
        for spec in SPECS:
            if spec.kind in {j.rows for j in TRAINED} and spec.kind not in lm_rows:
                lm_rows[spec.kind] = measure_saved(spec.locate(program), spec, args.budget, args.dev_rows)
    return lm_rows


def _judge_report(judges: JudgeSet, lm_rows: dict, program, kb, saved: dict | None,
                  only: list[str]) -> tuple[dict, JudgeSet]:
    """``(report, judges)``: judgment -> the LM's, trained judge's and cascade's figures and the
    chosen one (saved if not re-measured), and the judges with those choices (a new ``JudgeSet``)."""
    if not (lm_rows or "judges" in only):
        return saved.get("judges", {}).get("choice", {}), judges
    # the LM, the trained judge and the cascade, on the same dev rows; the best decides
    popqa_rows = popqa_rows_for(program) if {"grading", "strips"} & set(lm_rows) else {}
    judge_report, judges = choose(judges, lm_rows, popqa_rows, kb, knowledge_base() if popqa_rows else None,
                                  measures={t.judgment: t.measure for t in JUDGES})
    kept = {}
    for judgment in TRAINED:
        name = judgment.name
        if judgment.rows not in lm_rows and saved is not None and name in saved.get("judges", {}).get("choice", {}):
            judge_report[name] = saved["judges"]["choice"][name]  # the LM was not re-measured
            kept[name] = JudgeChoice(judge_report[name]["chosen"])
    return judge_report, replace(judges, choices={**judges.choices, **kept})


def _thresholds(saved: dict | None, only: list[str], judges, program) -> dict:
    """The retrieval evaluator's thresholds: the saved ones, the trained passage judge's, or calibrated for the LM."""
    if saved is not None and not {"judges", "grading"} & set(only):
        return saved["thresholds"]  # neither the passage judge nor the LM grader changed
    if judges.choice(PASSAGE).use != "lm":
        return {k: judges.thresholds[k] for k in ("lower", "upper")} | {
            "source": "trained passage judge",
            "dev_action_accuracy": judges.figures["adversarial_dev"]["action_accuracy"]}
    return calibrate_thresholds(predictor_of(program, PASSAGE))


def _manifest(args, lm, thresholds: dict, metrics: dict, judge_report: dict, judges, lm_thresholds: dict,
              saved: dict | None, only: list[str], started: float) -> dict:
    """The compile's manifest and ``dev_score``; a partial recompile keeps the saved settings, adds ``recompiled``."""
    manifest = {
        "lm": model_name(lm), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "dspy_version": dspy.__version__, "optimizer": args.optimizer, "budget": args.budget,
        "dev_rows": args.dev_rows if args.dev_rows is not None else BUDGETS[args.budget][1],
        "data_hash": data_hash(), "thresholds": thresholds, "metrics_dev": metrics,
        "judges": {"choice": judge_report, "thresholds": judges.thresholds, "figures": judges.figures,
                   "data_hash": judges_data_hash()},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if lm_thresholds:
        manifest["lm_thresholds_by_corpus"] = lm_thresholds
    if saved is not None:
        # the settings and seconds describe the whole compile; the recompiled part is recorded beside them
        for key in ("optimizer", "budget", "dev_rows", "seconds"):
            if key in saved:
                manifest[key] = saved[key]
            else:  # not recorded by the saved compile: this run's value would misdescribe it
                del manifest[key]
        if "judges" not in only and saved.get("judges", {}).get("data_hash"):
            # the judges were reused, not trained: they are still what the saved data and code made
            manifest["judges"]["data_hash"] = saved["judges"]["data_hash"]
        manifest["recompiled"] = {**saved.get("recompiled", {}), **{k: {
            "date": manifest["date"], "optimizer": args.optimizer, "budget": args.budget,
            "seconds": round(time.perf_counter() - started, 1)} for k in only}}
    manifest["dev_score"] = dev_score(manifest)
    return manifest


def _save(args, judges, program, manifest: dict) -> int:
    """The exit code of saving into ``--out``: 0 saved, 3 worse than the saved compile (not saved), 2 not written."""
    ok, why = may_overwrite(manifest, args.out, args.force)
    if not ok:
        print(f"not saved: {why}", file=sys.stderr)
        return 3
    try:
        save_judges(judges, args.out)
        save_compiled(program, manifest, args.out)
    except OSError as exc:  # a full disk: each file is replaced whole or not at all
        print(f"error: cannot save the compile into {args.out}: {exc.strerror or exc}; "
              "the files not yet replaced are the previous compile's", file=sys.stderr)
        return 2
    print(f"saved to {args.out} ({why})")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Compile, calibrate and save; returns 0, or 3 when a worse compile was not saved."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.kb:
        from optimize.training.sources import main_for_kb

        args.out = args.out or str(COMPILED_DIR)  # adapted judges sit beside the compile they adapt
        return main_for_kb(args, parser)
    if not args.out:  # never over the committed compile by default
        parser.error("--out: name the folder to write the compile to, e.g. --out my-compile (then ask --compiled "
                     "my-compile); --out compiled replaces the project's committed compile")
    only = _only(args, parser)

    lm = configure_lm(args.model, args.api_base)
    dspy.configure(lm=lm.copy(temperature=0.0))  # compile deterministically; the LM cache makes reruns fast
    kb = knowledge_base(adversarial.KB_DIR)  # rewriting is judged by what its query retrieves
    program = CRAG(knowledge_base=None, decide_retrieval=True)
    saved = _saved_compile(args, parser, program, lm)
    judges = reusable_judges(args.out, only)
    trained = judges is None
    if trained:
        print("\n== trained judges (passage, strip, support): training from the train splits", flush=True)
        judges = build_judges(kb)
    judges = replace(judges, embedder=judges.embedder or embedder())
    metrics = {k: m for k, m in (saved or {}).get("metrics_dev", {}).items() if k not in only}
    started = time.perf_counter()
    lm_rows = _compile_kinds(args, only, kb, judges, program, metrics)
    metrics = {spec.kind: metrics[spec.kind] for spec in SPECS if spec.kind in metrics}
    judge_report, judges = _judge_report(judges, lm_rows, program, kb, saved, only)
    print("\n| judgment | LM | trained | cascade | chosen |\n|---|---|---|---|---|")
    for judgment, r in judge_report.items():
        print(f"| {judgment} | {r.get('lm', '-')} | {r.get('trained', '-')} | {r.get('cascade', '-')} "
              f"| {r['chosen']} |")
    thresholds = _thresholds(saved, only, judges, program)
    lm_thresholds = help_centre_lm_thresholds(judges, predictor_of(program, PASSAGE), kb, lm, saved, only,
                                              calibrate=args.calibrate_lm_scores)
    manifest = _manifest(args, lm, thresholds, metrics, judge_report, judges, lm_thresholds, saved, only, started)
    print("\n| predictor | dev before | dev after | kept | demos |\n|---|---|---|---|---|")
    for kind, m in metrics.items():
        print(f"| {kind} | {m['before']:.3f} | {m['after']:.3f} | {m['kept']} | {m['demos']} |")
    print(f"\nthresholds: {json.dumps(thresholds)}\ndev score: {manifest['dev_score']:.4f}")
    code = _save(args, judges, program, manifest)
    if code == 0 and trained:
        measure_refinement(judges, args.out)
        # what ``program index`` adapts the judges from, without reading eval_sets/ (program.adaptation.labeled)
        print(f"saved {save_labeled(labeled_sources(), args.out, sources_stamp(()))}")
    return code


if __name__ == "__main__":
    sys.exit(main())
