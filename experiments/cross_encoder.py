"""A cross-encoder judge: MiniLM reads the question and the passage together and scores relevance.

CRAG's evaluator is a fine-tuned T5-large reading (question, passage) (Yan et al. 2024, §5.5);
InPars-light and GPL train small MiniLM rerankers on a domain's synthetic questions. This is the
same idea at the size 2 CPU cores allow: the packaged all-MiniLM-L6-v2 weights (the embedder's, 22 M
parameters, no download) under a one-logit head, fine-tuned with a plain torch loop (binary
cross-entropy) on (question, passage, label) rows. ``CrossEncoder.fit`` would need ``datasets``.

>>> judge = CrossEncoderJudge()                       # the packaged weights, an untrained head
>>> judge.fit([("how long do refunds take?", "Refunds take 5-10 business days.")], [1], epochs=1)
>>> judge.predict([("how long do refunds take?", "Payouts arrive in 2 days.")]).shape
(1,)
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from program.retrieval.embedding import default_model_path

MAX_LENGTH = 192  # word pieces: a 200-token chunk and its question (the embedder truncates at 256)


class CrossEncoderJudge:
    """(question, passage) -> relevance in [0, 1].

    Args:
        model_dir: a folder of BERT weights (a saved judge, or default the packaged all-MiniLM-L6-v2).
        max_length: word pieces read per pair; longer pairs are truncated (the passage's end first).
        seed: torch's seed for the new head and the batch order.

    Raises:
        program.retrieval.embedding.EmbeddingError: the packaged weights are missing.
    """

    def __init__(self, model_dir: str | Path | None = None, max_length: int = MAX_LENGTH, seed: int = 0):
        # lazy on purpose: torch and sentence-transformers take seconds; only this judge needs them
        import torch
        from sentence_transformers import CrossEncoder

        torch.manual_seed(seed)
        self.seed = seed
        self.steps = 0  # optimiser steps taken by the last fit
        self.encoder = CrossEncoder(str(model_dir or default_model_path()), num_labels=1, max_length=max_length,
                                    device="cpu")

    def fit(self, pairs: list[tuple[str, str]], labels: list[int], epochs: int = 1, batch_size: int = 16,
            lr: float = 3e-5, head_lr: float = 1e-3, warmup: int = 50, balance: bool = True,
            time_cap: float | None = None, log=None) -> "CrossEncoderJudge":
        """Fine-tune on ``pairs`` (question, passage) with 0/1 ``labels``; stops early at ``time_cap`` seconds.

        The new head learns at ``head_lr`` and the pre-trained layers at ``lr``, both warmed up linearly
        over ``warmup`` steps: a random head at the body's rate barely moves in a few hundred steps (the
        one-epoch run in docs/lab/2026-12-02-leave-one-domain-out.md). ``balance`` weighs the positive
        class by negatives / positives, since a retriever's top-k holds few relevant passages.

        Raises:
            ValueError: pairs and labels of different lengths, or no pairs."""
        import torch  # lazy on purpose, as __init__

        if len(pairs) != len(labels) or not pairs:
            raise ValueError(f"fit needs as many labels as pairs (got {len(pairs)} pairs, {len(labels)} labels)")
        model, tokenizer = self.encoder.model, self.encoder.tokenizer
        head = [p for n, p in model.named_parameters() if n.startswith("classifier")]
        body = [p for n, p in model.named_parameters() if not n.startswith("classifier")]
        optimiser = torch.optim.AdamW([{"params": body, "lr": lr}, {"params": head, "lr": head_lr}])
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / max(1, warmup)))
        positives = sum(1 for y in labels if y)
        weight = torch.tensor((len(labels) - positives) / positives if balance and 0 < positives < len(labels) else 1.0)
        order = list(range(len(pairs)))
        rng = random.Random(self.seed)
        started, steps = time.perf_counter(), 0
        model.train()
        for _ in range(epochs):
            rng.shuffle(order)
            for start in range(0, len(order), batch_size):
                batch = order[start: start + batch_size]
                encoded = tokenizer([pairs[i][0] for i in batch], [pairs[i][1] for i in batch], truncation=True,
                                    padding=True, max_length=self.encoder.max_seq_length, return_tensors="pt")
                logits = model(**encoded).logits.squeeze(-1)
                loss = torch.nn.functional.binary_cross_entropy_with_logits(
                    logits, torch.tensor([float(labels[i]) for i in batch]), pos_weight=weight)
                loss.backward()
                optimiser.step()
                scheduler.step()
                optimiser.zero_grad()
                steps += 1
                if log and steps % 50 == 0:
                    log(f"cross-encoder: {steps} steps, loss {loss.item():.3f}, {time.perf_counter() - started:.0f} s")
                if time_cap and time.perf_counter() - started > time_cap:
                    model.eval()
                    self.steps = steps
                    return self
        model.eval()
        self.steps = steps
        return self

    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32) -> np.ndarray:
        """Relevance in [0, 1] of each (question, passage) pair; shape ``(len(pairs),)``."""
        if not pairs:
            return np.zeros(0)
        return np.asarray(self.encoder.predict(pairs, batch_size=batch_size, show_progress_bar=False), dtype=float)

    def save(self, directory: str | Path) -> Path:
        """The weights, tokenizer and configuration in ``directory`` (about 90 MB: rebuilt, never committed)."""
        self.encoder.save(str(directory))
        return Path(directory)


__all__ = ["CrossEncoderJudge", "MAX_LENGTH"]
