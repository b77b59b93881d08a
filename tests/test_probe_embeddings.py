"""The embedding probe's feature sets: the vectors' product and difference, sentence cosines,
the judge's own features."""

from __future__ import annotations

import numpy as np

from experiments.probe_embeddings import _Vectors, features
from program.adaptation.pairs import Pairs

AXES = {"q": [1, 0, 0], "a": [1, 0, 0], "b": [0, 1, 0], "c": [0.6, 0.8, 0]}


class AxisEmbedder:
    """Each text's vector is the axis named by its first letter, either case (3 dimensions);
    counts the texts embedded."""

    def __init__(self):
        self.embedded = []

    def encode(self, texts):
        self.embedded += texts
        return np.array([AXES[t[0].lower()] for t in texts], dtype=float)


def pairs() -> Pairs:
    p = Pairs(cues=None)
    p.add([0.5, 2.0], None, 1, "g1", text=("q?", "B one. A two. C three."))
    p.add([0.1, 1.0], None, 0, "g2", text=("q?", "B only."))
    return p


def test_a_question_is_compared_with_the_whole_text_and_each_sentence():
    embedder = AxisEmbedder()
    out = features(pairs(), _Vectors(embedder), "passage")
    assert np.allclose(out["dense"], [[0.5, 2.0], [0.1, 1.0]])
    # sentence cosines: best, second best, mean ("a" 1.0, "c" 0.6, "b" 0.0)
    assert np.allclose(out["dense+max"][0, 2:], [1.0, 0.6, 1.6 / 3])
    assert np.allclose(out["dense+max"][1, 2:], [0.0, 0.0, 0.0])
    # the whole text starts with "b": product 0, difference |q - b|, then the sentence cosines and the cosine 0
    assert np.allclose(out["emb"][0], [0, 0, 0, 1, 1, 0, 1.0, 0.6, 1.6 / 3, 0.0])
    assert out["all"].shape == (2, 2 + 10)
    assert len(embedder.embedded) == len(set(embedder.embedded))  # each distinct text embedded once


def test_a_claim_is_compared_with_its_best_sentence():
    out = features(pairs(), _Vectors(AxisEmbedder()), "support")
    assert np.allclose(out["emb"][0], [1, 0, 0, 0, 0, 0, 1.0, 0.6, 1.6 / 3, 1.0])  # "a two." is the best sentence
