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
* the strip judgment's keep for the best strip F1 (CRAG §4.4);
* the support judgment's *fully* / *partially* for the best mean of the adversarial rows' IsSup
  verdict accuracy and the PopQA claims' kept accuracy (a claim is kept at *partially*).

Each judgment's training slice fits its judge and thresholds (``optimize.judgments``): this
module runs them in turn and merges what they report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace

from eval_sets import adversarial
from eval_sets.adversarial import KB_DIR
from eval_sets.popqa import load_questions
from optimize.judgments import JUDGES, TrainingData
from program.adaptation.fit import trained_set
from program.app import resources
from program.app.resources import web_backend
from program.judges import JudgeSet, save_judges


def train_judges(popqa_kb, adversarial_kb, embedder, log=print, web=None) -> JudgeSet:
    """Train, calibrate and measure each judgment's trained judge (``optimize.judgments.JUDGES``:
    passage, strip, support); return them with their figures.

    Args:
        popqa_kb: the PopQA knowledge base (``program.app.resources.knowledge_base()``).
        adversarial_kb: the adversarial help-centre knowledge base.
        embedder: the all-MiniLM-L6-v2 embedder (``encode(list[str])``).
        web: the search backend whose pages the strip judge also learns from; default the
            PopQA offline web snapshot (``program.app.resources.web_backend("snapshot")``).
    """
    started = time.perf_counter()

    def log_step(message):
        log(f"judges [{time.perf_counter() - started:6.1f} s]: {message}")

    kinds = [t.judgment.rows for t in JUDGES] + ["queries"]
    data = TrainingData(load_questions(split="train"), load_questions(split="dev"),
                        {kind: {s: adversarial.load_rows(kind, s) for s in ("train", "dev")} for kind in kinds},
                        popqa_kb, adversarial_kb, embedder, web if web is not None else web_backend("snapshot"))
    fitted, thresholds, by_corpus = {}, {}, {}
    for training in JUDGES:
        log_step(f"{training.judgment.name} pairs ({len(data.train_q)} PopQA train questions, adversarial train rows)")
        fitted[training.judgment] = f = training.fit(data)
        thresholds.update(f.thresholds)
        by_corpus.update(f.by_corpus)
    judges = trained_set({j: f.judge for j, f in fitted.items()}, thresholds=thresholds,
                         thresholds_by_corpus=by_corpus, embedder=embedder)
    log_step("measuring on dev")
    figures = measure_dev(judges, data)
    figures["train_rows"] = {j.name: len(f.pairs) for j, f in fitted.items()}
    figures["seconds"] = round(time.perf_counter() - started, 1)
    return replace(judges, figures=figures)


def measure_dev(judges: JudgeSet, data: TrainingData) -> dict:
    """The trained judges' dev figures, each judgment's ``dev_figures`` merged by section:
    PopQA dev passage AUC and the "any top-3 relevant" decision (with plain cosine's for
    comparison), PopQA dev strip AUC and F1 (every answering strip of the top-3 passages and up
    to 4 others per question, as in training), adversarial dev action accuracy on the queries and
    band accuracy on the grading rows, strip F1, support verdict accuracy."""
    figures: dict = {}
    for training in JUDGES:
        for section, values in training.dev_figures(judges, data).items():
            figures.setdefault(section, {}).update(values)
    return figures


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
