"""The labeled sources' training pairs as the compile saved them: ``<compiled>/labeled_pairs.npz``.

``program index`` adapts the judges to a knowledge base by fitting them on these pairs beside the
rows the knowledge base gives of itself (ARES §3). The pairs are features of PopQA's and the
labeled domains' training rows; the compile builds them from ``eval_sets/``
(``python -m optimize.training.sources --out compiled``), so the runtime reads no labeled set.
The rows' texts are not saved (no judge fitted here reads them).

One compressed NumPy archive, read with ``allow_pickle=False``: per source and judge the
``dense``, ``labels`` and ``targets`` arrays, and one ``meta`` entry (UTF-8 JSON) with each
source's name, corpus key, expected actions, support weight, and each pair set's groups and cues.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path

import numpy as np

from program.adaptation.fit import SourcePairs
from program.adaptation.pairs import Pairs
from program.atomic import write_atomic

LABELED_FILE = "labeled_pairs.npz"
KINDS = ("passage", "strip", "support", "claims")
FORMAT = 1


class LabeledPairsError(ValueError):
    """The saved labeled pairs are missing or unreadable; the message names the file and the fix."""


def labeled_path(directory: str | Path) -> Path:
    """``<directory>/labeled_pairs.npz``."""
    return Path(directory) / LABELED_FILE


def _pair_arrays(prefix: str, pairs: Pairs) -> dict[str, np.ndarray]:
    dense = np.asarray(pairs.dense, dtype=np.float64)
    return {f"{prefix}.dense": dense.reshape(len(pairs), -1) if len(pairs) else np.zeros((0, 0)),
            f"{prefix}.labels": np.asarray(pairs.labels, dtype=np.int64),
            f"{prefix}.targets": np.asarray(pairs.targets, dtype=np.float64)}


def save_labeled(sources: list[SourcePairs], directory: str | Path, stamp: str = "") -> Path:
    """Write ``sources`` (their pairs; the knowledge bases as corpus keys) to ``directory``, atomically,
    with ``stamp``: what they were built from (``optimize.training.sources.sources_stamp``).

    Returns the file written. Raises ``OSError`` when it cannot be written (the previous one stays)."""
    path = labeled_path(directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pairs_bytes(sources, {"stamp": stamp}))
    return path


def pairs_bytes(sources: list[SourcePairs], meta: dict | None = None) -> bytes:
    """``sources``' pairs as one compressed NumPy archive (the format of ``labeled_pairs.npz``),
    with ``meta`` (JSON-able) beside them; :func:`pairs_from_bytes` reads it back."""
    arrays, meta = {}, {"format": FORMAT, **(meta or {}), "sources": []}
    for i, s in enumerate(sources):
        entry = {"name": s.name, "corpus": s.key(), "expected": s.expected, "support_weight": s.support_weight,
                 "counts": s.counts, "pairs": {}}
        for kind in KINDS:
            pairs = getattr(s, kind)
            if pairs is None:
                continue
            arrays.update(_pair_arrays(f"{i}.{kind}", pairs))
            entry["pairs"][kind] = {"groups": pairs.groups, "cues": pairs.cues}
        meta["sources"].append(entry)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def pairs_from_bytes(data: bytes, leave_out=()) -> tuple[dict, list[SourcePairs]]:
    """``(meta, sources)`` of an archive :func:`pairs_bytes` wrote, without the sources named in
    ``leave_out``.

    Raises:
        ValueError: not such an archive, or another format (``LabeledPairsError`` for the format)."""
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            meta = json.loads(archive["meta"].tobytes().decode("utf-8"))
            if meta.get("format") != FORMAT:
                raise LabeledPairsError(f"format {meta.get('format')!r}, expected {FORMAT}")
            return meta, [SourcePairs(e["name"], None, *(_pairs(archive, f"{i}.{k}", e["pairs"][k]) for k in KINDS[:3]),
                                      expected=e["expected"], support_weight=e["support_weight"],
                                      corpus=e["corpus"], counts=e["counts"],
                                      claims=_pairs(archive, f"{i}.claims", e["pairs"]["claims"])
                                      if "claims" in e["pairs"] else None)
                          for i, e in enumerate(meta["sources"]) if e["name"] not in set(leave_out)]
    except (OSError, KeyError, ValueError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
        if isinstance(exc, LabeledPairsError):
            raise
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def _pairs(archive, prefix: str, saved: dict) -> Pairs:
    dense = archive[f"{prefix}.dense"]
    n = len(archive[f"{prefix}.labels"])
    return Pairs(dense=dense.tolist() if n else [], cues=saved["cues"],
                 labels=archive[f"{prefix}.labels"].tolist(), groups=list(saved["groups"]),
                 targets=archive[f"{prefix}.targets"].tolist(), texts=[None] * n)


def load_labeled(directory: str | Path, leave_out=()) -> list[SourcePairs]:
    """The saved labeled sources, without those named in ``leave_out`` (a domain measured with its
    labels left out), in the saved order.

    Raises:
        LabeledPairsError: the file is missing (make it: ``python -m optimize.training.sources --out
            DIR``) or unreadable; one line naming it."""
    path = labeled_path(directory)
    if not path.is_file():
        raise LabeledPairsError(f"{path} is missing: the judges cannot be adapted without the labeled pairs "
                                f"(make them: python -m optimize.training.sources --out {Path(directory)})")
    try:
        return pairs_from_bytes(path.read_bytes(), leave_out)[1]
    except LabeledPairsError as exc:
        raise LabeledPairsError(f"{path}: {exc}") from None
    except (OSError, ValueError) as exc:
        raise LabeledPairsError(f"{path} is unreadable ({exc}); make it again: "
                                f"python -m optimize.training.sources --out {Path(directory)}") from None


def saved_stamp(directory: str | Path) -> str:
    """The ``stamp`` the saved pairs were built with ("" when none was given).

    Raises ``LabeledPairsError`` as ``load_labeled`` does."""
    path = labeled_path(directory)
    if not path.is_file():
        raise LabeledPairsError(f"{path} is missing")
    try:
        with np.load(path, allow_pickle=False) as archive:
            return json.loads(archive["meta"].tobytes().decode("utf-8")).get("stamp", "")
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise LabeledPairsError(f"{path} is unreadable ({type(exc).__name__}: {exc})") from None


def labeled_stamp(directory: str | Path) -> str:
    """sha256 (16 hex digits) of the saved labeled pairs' bytes ("-" hashed when there are none)."""
    path = labeled_path(directory)
    return hashlib.sha256(path.read_bytes() if path.is_file() else b"-").hexdigest()[:16]


__all__ = ["LABELED_FILE", "LabeledPairsError", "labeled_path", "labeled_stamp", "load_labeled", "pairs_bytes",
           "pairs_from_bytes", "save_labeled", "saved_stamp"]
