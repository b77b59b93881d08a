"""Do the embedder's vectors carry a judgment to a domain whose labels were left out?

``python -m experiments.probe_embeddings [--out reports/embedding-probe]``

The trained judges read cheap signals (``program.judgments`` slices): cosine, name coverage, word
overlap, hashed answer-type word pairs. On the documentation domains, left out, they are near
chance (``experiments.transfer``). A judge "that reads meaning" could read the all-MiniLM-L6-v2
vectors themselves. This probe fits a logistic regression on four feature sets, for each labeled
domain three ways (its labels out; out plus its documents' own rows, ``program.adaptation.synthetic_rows``;
in), and reports ROC AUC on its measured rows (the transfer run's rows: test queries' top-5 chunks;
strip and support rows of the test split where the domain has them, else dev):

=============  ====================================================================================
``dense``      the judge's own dense features (no hashed cues)
``dense+max``  plus the best, second best and mean cosine of the question with the text's sentences
``emb``        the vectors' elementwise product and absolute difference (question x text, or claim x
               its best evidence sentence), with the sentence cosines and the cosine
``all``        ``dense`` and ``emb`` together
=============  ====================================================================================

Training rows: PopQA ``train`` passages (passages only), the other labeled domains' ``train`` rows,
the domain's own document rows (``adapt``) or ``train`` rows (``in``). Nothing is chosen on the
measured rows; the probe saves nothing but ``summary.json``. About 10 minutes on 2 cores, most of it
embedding.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from program.atomic import write_atomic
from program.judgments import PASSAGE, STRIP, SUPPORT, TRAINED

KINDS = ("dense", "dense+max", "emb", "all")
JUDGMENTS = tuple(j.name for j in TRAINED)


def _with_text(pairs):
    """The rows of ``pairs`` that hold their texts (labeled grading rows do not)."""
    from program.adaptation.pairs import Pairs

    out = Pairs(cues=None)
    for i, t in enumerate(pairs.texts):
        if t is not None:
            out.add(pairs.dense[i], None, pairs.labels[i], pairs.groups[i], pairs.targets[i], t)
    return out


class _Vectors:
    """Embeds each distinct text once."""

    def __init__(self, embedder):
        self.embedder, self.cache = embedder, {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.cache))
        if new:
            self.cache.update(zip(new, np.asarray(self.embedder.encode(new), dtype=np.float32)))
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, 384), np.float32)


def features(pairs, vectors: _Vectors, judgment: str) -> dict[str, np.ndarray]:
    """The four feature sets (``KINDS``) of ``pairs`` (rows with texts ``(question or claim, text)``)."""
    from program.judgments.support import evidence_sentences

    first = vectors([t[0] for t in pairs.texts])
    sentence_cos, partner = [], []
    for (_, text), u in zip(pairs.texts, first):
        sentences = evidence_sentences(text)[:30] or [text]
        s = vectors(sentences)
        cos = s @ u
        order = np.argsort(cos)[::-1]
        sentence_cos.append([cos[order[0]], cos[order[min(1, len(order) - 1)]], cos.mean()])
        partner.append(s[order[0]])
    # a claim is compared with its best sentence; a question with the whole text
    second = np.stack(partner) if judgment == SUPPORT.name else vectors([t[1] for t in pairs.texts])
    dense = np.asarray(pairs.dense, dtype=np.float32)
    sent = np.asarray(sentence_cos, dtype=np.float32)
    cosine = np.einsum("ij,ij->i", first, second)[:, None]
    emb = np.hstack([first * second, np.abs(first - second), sent, cosine])
    return {"dense": dense, "dense+max": np.hstack([dense, sent]), "emb": emb, "all": np.hstack([dense, emb])}


def collect(log=print) -> dict:
    """``{source: {judgment: Pairs}}`` for PopQA ``train`` (passages), each domain's ``train`` rows,
    its documents' rows (``<name>:docs``) and its measured rows (``<name>:measured``)."""
    from eval_sets.domains import DOMAINS, load_rows
    from eval_sets.popqa import load_questions
    from optimize.training.pairs import adversarial_passage_pairs, popqa_passage_pairs
    from program.adaptation.pairs import adversarial_strip_pairs, support_rows_pairs
    from program.adaptation.synthetic_rows import document_source
    from program.app import resources

    embedder = resources.embedder()
    data = {"popqa": {PASSAGE.name: popqa_passage_pairs(load_questions(split="train"), resources.knowledge_base())}}
    for name in DOMAINS:
        kb = resources.knowledge_base(DOMAINS[name].kb_dir)
        log(f"{name}: pairs")
        split = {kind: "test" if load_rows(name, kind, "test") else "dev" for kind in (STRIP.rows, SUPPORT.rows)}
        data[name] = {PASSAGE.name: adversarial_passage_pairs(load_rows(name, PASSAGE.rows, "train"),
                                                              load_rows(name, "queries", "train"), kb, embedder),
                      STRIP.name: adversarial_strip_pairs(load_rows(name, STRIP.rows, "train"), embedder),
                      SUPPORT.name: support_rows_pairs(load_rows(name, SUPPORT.rows, "train"), embedder)}
        own = document_source(f"{name} (documents)", kb, embedder, log=log)
        data[f"{name}:docs"] = {PASSAGE.name: own.passage, STRIP.name: own.strip, SUPPORT.name: own.support}
        data[f"{name}:measured"] = {
            PASSAGE.name: adversarial_passage_pairs([], load_rows(name, "queries", "test"), kb, embedder),
            STRIP.name: adversarial_strip_pairs(load_rows(name, STRIP.rows, split[STRIP.rows]), embedder),
            SUPPORT.name: support_rows_pairs(load_rows(name, SUPPORT.rows, split[SUPPORT.rows]), embedder)}
    return {src: {j: _with_text(p) for j, p in judged.items()} for src, judged in data.items()}


def probe(data: dict, embedder, log=print) -> dict:
    """ROC AUC per domain, judgment, feature set and variant (``out``, ``adapt``, ``in``)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    from eval_sets.domains import DOMAINS
    from program.adaptation.calibrate import auc

    vectors = _Vectors(embedder)
    feats = {src: {j: features(p, vectors, j) for j, p in judged.items() if len(p)} for src, judged in data.items()}
    summary = {}
    for name in DOMAINS:
        others = [m for m in DOMAINS if m != name]
        variants = {"out": ["popqa", *others], "adapt": ["popqa", *others, f"{name}:docs"],
                    "in": ["popqa", *others, name]}
        summary[name] = {}
        for judgment in JUDGMENTS:
            measured = data[f"{name}:measured"][judgment]
            row = {"rows": len(measured),
                   "cosine": auc(measured.labels, feats[f"{name}:measured"][judgment]["emb"][:, -1])}
            for kind in KINDS:
                for variant, sources in variants.items():
                    srcs = [s for s in sources if judgment in feats[s]]
                    x = np.vstack([feats[s][judgment][kind] for s in srcs])
                    y = np.concatenate([data[s][judgment].labels for s in srcs])
                    scaler = StandardScaler().fit(x)
                    model = LogisticRegression(C=1.0, max_iter=3000, class_weight="balanced", random_state=0)
                    model.fit(scaler.transform(x), y)
                    scores = model.predict_proba(scaler.transform(feats[f"{name}:measured"][judgment][kind]))[:, 1]
                    row[f"{kind}/{variant}"] = auc(measured.labels, scores)
            summary[name][judgment] = row
            log(f"{name} {judgment}: " + " ".join(f"{k}={v}" for k, v in row.items()))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.probe_embeddings",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="reports/embedding-probe", help="folder for summary.json")
    args = parser.parse_args(argv)
    from program.app import resources

    started = time.perf_counter()
    log = lambda m: print(f"[{time.perf_counter() - started:6.0f} s] {m}", file=sys.stderr)  # noqa: E731
    summary = probe(collect(log), resources.embedder(), log)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "summary.json", json.dumps({"seconds": round(time.perf_counter() - started, 1), **summary},
                                                  indent=2) + "\n")
    print("| domain | judgment | rows | cosine | " + " | ".join(f"{k} out / adapt / in" for k in KINDS) + " |")
    print("|---|---|---|---|" + "---|" * len(KINDS))
    for name, judged in summary.items():
        for judgment, row in judged.items():
            cells = [" / ".join(f"{row[f'{k}/{v}']:.3f}" for v in ("out", "adapt", "in")) for k in KINDS]
            print(f"| {name} | {judgment} | {row['rows']} | {row['cosine']:.3f} | " + " | ".join(cells) + " |")
    print(f"saved {out / 'summary.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
