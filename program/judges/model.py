"""A small trained judge: logistic regression over dense signals and hashed answer-type cues.

The CRAG paper's evaluator is a fine-tuned T5-large (§5.5); MiniCheck's checkers are small
fine-tuned models. On 2 CPU cores without a GPU, what trains inside the compile's budget and
scores in microseconds is a linear model: scikit-learn's ``LogisticRegression`` over
standardised dense features (``program.judgments`` slices) plus ``FeatureHasher`` columns for
the question-word x text-word cue pairs. It is saved as JSON (weights, not a pickle), so the
committed compile is small, readable and loads with any scikit-learn version.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

HASH_FEATURES = 2 ** 18


def _hasher():
    # lazy on purpose: scikit-learn loads in about a second; a judge scores without it until it hashes cues
    from sklearn.feature_extraction import FeatureHasher

    return FeatureHasher(n_features=HASH_FEATURES, input_type="string", alternate_sign=False)


@dataclass
class LinearJudge:
    """Logistic regression scoring one (question or claim, text) pair in [0, 1].

    Attributes:
        name: the judgment (``passage``, ``strip``, ``support``).
        feature_names: the dense features, in order.
        mean, scale: standardisation of the dense features (len ``feature_names``).
        coef: weights of the standardised dense features.
        cue_coef: hashed cue column -> weight (only the non-zero ones are kept).
        intercept: the bias.
        cue_weight: the scale applied to cue counts before weighting (cues are counts per pair).
    """

    name: str
    feature_names: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    cue_coef: dict[int, float] = field(default_factory=dict)
    cue_weight: float = 1.0

    def decision(self, dense: list[float], cues: list[str] | None = None) -> float:
        """The logit of one pair (before the sigmoid)."""
        x = (np.asarray(dense, dtype=float) - self.mean) / self.scale
        z = float(x @ np.asarray(self.coef)) + self.intercept
        if cues and self.cue_coef:
            columns = _hasher().transform([cues]).indices
            z += self.cue_weight * sum(self.cue_coef.get(int(c), 0.0) for c in columns)
        return z

    def score(self, dense: list[float], cues: list[str] | None = None) -> float:
        """Probability in [0, 1] that the pair is relevant / supported."""
        return float(1.0 / (1.0 + np.exp(-self.decision(dense, cues))))

    @classmethod
    def fit(cls, name: str, feature_names: list[str], dense: np.ndarray, labels: np.ndarray,
            cues: list[list[str]] | None = None, c: float = 1.0, cue_weight: float = 1.0,
            sample_weight: np.ndarray | None = None, seed: int = 0) -> "LinearJudge":
        """Train on ``dense`` (n x len(feature_names)), ``labels`` (n, 0/1) and optional cue lists.

        Raises:
            ValueError: fewer than two classes in ``labels``, or mismatched lengths.
        """
        # lazy on purpose: only training needs scipy and scikit-learn's solver
        from scipy import sparse
        from sklearn.linear_model import LogisticRegression

        dense = np.asarray(dense, dtype=float)
        labels = np.asarray(labels, dtype=int)
        if len(set(labels.tolist())) < 2 or len(dense) != len(labels):
            raise ValueError(f"{name}: need both classes and one label per row ({len(dense)} rows)")
        mean, scale = dense.mean(axis=0), dense.std(axis=0)
        scale[scale == 0] = 1.0
        x = sparse.csr_matrix((dense - mean) / scale)
        n = len(feature_names)
        used = np.arange(n)
        if cues is not None:
            hashed = (cue_weight * _hasher().transform(cues)).tocsc()
            # only the hashed columns some row has: an all-zero column's L2-regularised weight is 0 at
            # every step of the solver, and L-BFGS over 2^18 of them took 90 % of a fit's time
            present = np.flatnonzero(np.diff(hashed.indptr))
            x = sparse.hstack([x, hashed[:, present]]).tocsr()
            used = np.concatenate([used, n + present])
        model = LogisticRegression(C=c, max_iter=2000, random_state=seed)
        model.fit(x, labels, sample_weight=sample_weight)
        weights = np.zeros(n + (HASH_FEATURES if cues is not None else 0))
        weights[used] = model.coef_[0]
        cue_coef = {int(i): round(float(weights[n + i]), 5) for i in np.flatnonzero(np.abs(weights[n:]) > 1e-4)}
        return cls(name, list(feature_names), mean.round(6).tolist(), scale.round(6).tolist(),
                   weights[:n].round(6).tolist(), round(float(model.intercept_[0]), 6), cue_coef, cue_weight)

    def to_dict(self) -> dict:
        d = dict(self.__dict__)
        d["cue_coef"] = {str(k): v for k, v in sorted(self.cue_coef.items())}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LinearJudge":
        """Rebuild from ``to_dict``'s output. Raises ``KeyError``/``TypeError`` on a malformed dict."""
        d = dict(d)
        d["cue_coef"] = {int(k): float(v) for k, v in d.get("cue_coef", {}).items()}
        return cls(**d)
