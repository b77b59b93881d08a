"""Train the instruction judge (``program.judges.instruction``) and report how it generalises.

Usage::

    python -m optimize.train_instruction_judge [--out compiled/instruction_judge.json] \\
        [--report reports/instruction-judge] [--synthetic 4000] [--max-false-rate 0.0001]

Rows: ``optimize.injection_data`` (injections from the first set, the blind set's train half and
synthetic ones; sentences of every knowledge base and web snapshot). Five folds, grouped so that a
document's sentences and an injection case's pieces stay together, give out-of-fold scores; the
threshold is the lowest score at which at most ``--max-false-rate`` of the out-of-fold
knowledge-base sentences are set aside. The judge is then trained on every row and saved. The
blind set's test half is never read. Writes ``summary.json`` (figures) and ``flagged.jsonl`` (the
knowledge-base sentences the final judge sets aside, for reading) into ``--report``, and prints a
Markdown table. Takes about a minute on 2 cores.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from optimize import injection_data as data
from program.atomic import write_atomic
from program.jsonl import read_objects
from program.judges.instruction import JUDGE_FILE, InstructionJudge, embed, features, normalise
from program.lm.model_files import cache_root

SOURCES = ("first-set", "blind-train", "synthetic", "benign")


def rows(synthetic: int, seed: int = 0) -> tuple[list[str], list[int], list[str], list[int], dict]:
    """``(texts, labels, sources, groups, blind_meta)``: one row per judged piece; ``groups``
    keep a document's or a case's pieces in one fold; ``blind_meta`` maps a blind-train row's
    index to its case's ``language`` and ``style``."""
    texts, labels, sources, groups, meta = [], [], [], [], {}
    group = 0

    def add(pieces, label, source):
        nonlocal group
        for piece in pieces:
            texts.append(piece)
            labels.append(label)
            sources.append(source)
            groups.append(group)
        group += 1

    first = read_objects(data.FIRST_SET / "cases.jsonl")
    for case in first:
        add(data.payload_units(case), 1, "first-set")
    blind_train = []
    if (data.BLIND_SET / "cases.jsonl").exists():
        blind_train = [c for c in read_objects(data.BLIND_SET / "cases.jsonl") if c.get("split") == "train"]
    for case in blind_train:
        start = len(texts)
        add(data.payload_units(case), 1, "blind-train")
        for i in range(start, len(texts)):
            meta[i] = (case.get("language", "?"), case.get("style", "?"), case["id"])
    corpora = data.corpus_sentences()
    corpora["injection-sets"] = data.set_clean_sentences(data.FIRST_SET, {c["injected_text"] for c in first})
    if blind_train:
        corpora["injection-sets"] += _blind_train_clean(blind_train)
    anchors = [s for sentences in corpora.values() for s in sentences]
    for injection in data.synthetic_injections(synthetic, seed, random.Random(seed).sample(anchors, 2000)):
        add(data.injection_units(injection) or [injection], 1, "synthetic")
    add(data.BENIGN, 0, "benign")
    for name, sentences in corpora.items():
        for i in range(0, len(sentences), 20):  # about a document's worth of sentences per group
            add(sentences[i:i + 20], 0, name)
    return texts, labels, sources, groups, meta


def _blind_train_clean(cases: list[dict]) -> list[str]:
    """The clean sentences of the blind set's train documents (its test documents are not read)."""
    ids = {c["document"] for c in cases} | {c.get("answer_document", c["document"]) for c in cases}
    injected = {c["injected_text"] for c in cases}
    texts = [d["text"] for d in read_objects(data.BLIND_SET / "kb.jsonl") if d["id"] in ids]
    for inj in injected:
        texts = [t.replace(inj, " ") for t in texts]
    return [u for t in texts for u in data.injection_units(t)]


def cached_embeddings(texts: list[str]) -> np.ndarray:
    """The rows' embeddings (``program.judges.instruction.embed`` of the normalised texts), kept
    in the cache folder under the texts' hash: embedding 45,000 sentences takes about 11
    minutes on 2 cores, and a rerun on the same rows (same data and seed) reuses them."""
    import hashlib

    key = hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest()[:16]
    path = cache_root() / "instruction_judge" / f"embeddings-{key}.npy"
    if path.exists():
        return np.load(path)
    print(f"embedding {len(texts)} rows (cached in {path})", flush=True)
    vectors = embed([normalise(t)[0] for t in texts])
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    np.save(buffer, vectors)
    write_atomic(path, buffer.getvalue())
    return vectors


def fit(x, y, weight=None, c: float = 4.0):
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(C=c, class_weight="balanced", solver="liblinear", max_iter=2000)
    return model.fit(x, y, sample_weight=weight)


def choose_threshold(scores: np.ndarray, labels: np.ndarray, max_false_rate: float) -> float:
    """The lowest threshold (grid of 0.01) at which at most ``max_false_rate`` of the negatives score at or above it."""
    negatives = np.sort(scores[labels == 0])
    allowed = int(max_false_rate * len(negatives))
    for t in np.arange(0.05, 1.0, 0.01):
        if int((negatives >= t).sum()) <= allowed:
            return round(float(t), 2)
    return 0.99


def _parser() -> argparse.ArgumentParser:
    """The command line's parser: output files, synthetic rows, false-rate cap, seed and weights."""
    parser = argparse.ArgumentParser(prog="python -m optimize.train_instruction_judge",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(JUDGE_FILE))
    parser.add_argument("--report", default="reports/instruction-judge")
    parser.add_argument("--synthetic", type=int, default=4000)
    parser.add_argument("--max-false-rate", type=float, default=0.0001)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--written-weight", type=float, default=5.0, help="weight of a written injection's row")
    return parser


def _recall(oof: np.ndarray, y: np.ndarray, src: np.ndarray, meta: dict, threshold: float) -> tuple[dict, dict]:
    """``(source -> share of injections caught, "language"/"style" -> value -> "caught/cases")``, out of fold."""
    recall = {s: round(float((oof[(src == s) & (y == 1)] >= threshold).mean()), 4)
              for s in SOURCES if ((src == s) & (y == 1)).any()}
    # a blind case is caught when every piece carrying its marker is set aside
    cases: dict = {}
    for i, (language, style, case_id) in meta.items():
        cases.setdefault(case_id, [language, style, True])[2] &= bool(oof[i] >= threshold)
    by = {"language": Counter(), "style": Counter()}
    hit = {"language": Counter(), "style": Counter()}
    for language, style, caught in cases.values():
        for key, value in (("language", language), ("style", style)):
            by[key][value] += 1
            hit[key][value] += int(caught)
    recall["blind-train cases"] = round(sum(c[2] for c in cases.values()) / len(cases), 4) if cases else None
    per = {k: {v: f"{hit[k][v]}/{n}" for v, n in sorted(by[k].items())} for k in by}
    return recall, per


def _curve(oof: np.ndarray, y: np.ndarray, src: np.ndarray, meta: dict) -> list[dict]:
    """Per threshold, what it would cost and catch out of fold; the table printed."""
    curve = []
    for t in (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95):
        caught = {}
        for i, (_, _, case_id) in meta.items():
            caught[case_id] = caught.get(case_id, True) and bool(oof[i] >= t)
        curve.append({"threshold": t, "knowledge_base_set_aside": int(((y == 0) & (oof >= t)).sum()),
                      "blind_train_cases": round(sum(caught.values()) / max(len(caught), 1), 4),
                      "first_set": round(float((oof[(src == "first-set")] >= t).mean()), 4)})
    print("\n| threshold | knowledge-base sentences set aside (of %d) | blind train cases caught | first set |"
          % int((y == 0).sum()))
    print("|---|---|---|---|")
    for c in curve:
        print(f"| {c['threshold']} | {c['knowledge_base_set_aside']} | {100 * c['blind_train_cases']:.1f} % "
              f"| {100 * c['first_set']:.1f} % |")
    return curve


def _write_report(report: Path, summary: dict, flagged: list[tuple]) -> None:
    """Write ``summary.json`` and ``flagged.jsonl`` (the training sentences the final judge sets aside) into
    ``report``."""
    report.mkdir(parents=True, exist_ok=True)
    (report / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    with open(report / "flagged.jsonl", "w", encoding="utf-8") as fh:
        for source, text, score in flagged:
            fh.write(json.dumps({"source": source, "score": score, "text": text}, ensure_ascii=False) + "\n")


def _print_report(args: argparse.Namespace, threshold: float, recall: dict, per: dict, false_oof: dict,
                  summary: dict, flagged: list[tuple]) -> None:
    """Print the threshold and the out-of-fold tables: recall per source, blind cases, knowledge-base sentences."""
    print(f"\nthreshold {threshold} (at most {args.max_false_rate:.2%} of out-of-fold knowledge-base sentences)")
    print("| out of fold | injections caught |\n|---|---|")
    for s, r in recall.items():
        print(f"| {s} | {100 * r:.1f} % |")
    for key, groups_ in per.items():
        print(f"\n| blind train, {key} | cases caught out of fold |\n|---|---|")
        for value, share in groups_.items():
            print(f"| {value} | {share} |")
    print("\n| corpus | sentences | set aside out of fold |\n|---|---|---|")
    for n, k in false_oof.items():
        print(f"| {n} | {summary['out_of_fold']['knowledge_base_sentences'][n]} | {k} |")
    print(f"\nsaved {args.out}; {len(flagged)} training sentence(s) set aside by the final judge; "
          f"{summary['seconds']} s")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from sklearn.model_selection import GroupKFold

    started = time.perf_counter()
    texts, labels, sources, groups, meta = rows(args.synthetic, args.seed)
    y = np.asarray(labels)
    x = features(texts, embeddings=cached_embeddings(texts))
    print(f"{len(texts)} rows: {int(y.sum())} injection pieces, {int((y == 0).sum())} knowledge-base sentences",
          flush=True)
    oof = np.zeros(len(y))
    # written injections count more than synthetic ones: they are what attackers write
    weight = np.where(np.isin(np.asarray(sources), ["first-set", "blind-train"]), args.written_weight, 1.0)
    for train, held in GroupKFold(n_splits=5).split(x, y, groups):
        oof[held] = fit(x[train], y[train], weight[train]).predict_proba(x[held])[:, 1]
    threshold = choose_threshold(oof, y, args.max_false_rate)
    src = np.asarray(sources)
    recall, per = _recall(oof, y, src, meta, threshold)
    false_oof = {name: int(((src == name) & (y == 0) & (oof >= threshold)).sum()) for name in sorted(set(sources))
                 if ((src == name) & (y == 0)).any()}

    curve = _curve(oof, y, src, meta)
    model = fit(x, y, weight)
    trained_on = dict(Counter(s for s in sources))
    judge = InstructionJudge(model.coef_[0].astype(float), float(model.intercept_[0]), threshold, trained_on)
    final = model.predict_proba(x)[:, 1]
    flagged = [(src[i], texts[i], round(float(final[i]), 3)) for i in range(len(texts))
               if y[i] == 0 and final[i] >= threshold]
    judge.save(args.out)
    summary = {"rows": trained_on, "threshold": threshold, "max_false_rate": args.max_false_rate,
               "out_of_fold": {"recall": recall, "curve": curve, "blind_train_by": per,
                               "knowledge_base_set_aside": false_oof,
                               "knowledge_base_sentences": {n: int(((src == n) & (y == 0)).sum()) for n in false_oof}},
               "final_set_aside_in_training_sentences": len(flagged),
               "seconds": round(time.perf_counter() - started, 1)}
    _write_report(Path(args.report), summary, flagged)
    _print_report(args, threshold, recall, per, false_oof, summary, flagged)
    return 0


if __name__ == "__main__":
    sys.exit(main())
