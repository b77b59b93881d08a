"""A vocabulary's files beside its index: ``vocabulary.json`` (terms, kinds, parameters, the stamp
of the index it belongs to), ``vocabulary.npy`` (row i = term i's vector) and
``vocabulary_terms.npy`` (each term's own embedding, before its passages are mixed in), each
written to a temporary name and renamed into place, the vectors first. A file set that does not
match its stamp or parameters is ignored (and rebuilt by the knowledge base).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from program.retrieval.vocabulary import DEFAULT_PARAMS, FORMAT_VERSION, Vocabulary

VOCABULARY_JSON, VOCABULARY_NPY, TERMS_NPY = "vocabulary.json", "vocabulary.npy", "vocabulary_terms.npy"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _replace(tmp: Path, final: Path) -> None:
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)


def save_vocabulary(vocabulary: Vocabulary, folder: str | Path, stamp: dict) -> None:
    """Write ``vocabulary.npy`` (and ``vocabulary_terms.npy``) then ``vocabulary.json`` into
    ``folder``, each atomically.

    ``stamp`` identifies the index the vocabulary belongs to (embedding model, dimensions,
    chunk count, index creation time); :func:`load_vocabulary` checks it.
    """
    folder = Path(folder)
    tag = f".tmp-{os.getpid()}-{id(vocabulary)}"
    npy, own, meta = folder / VOCABULARY_NPY, folder / TERMS_NPY, folder / VOCABULARY_JSON
    tmps = [folder / (name + tag) for name in (VOCABULARY_NPY, TERMS_NPY, VOCABULARY_JSON)]
    try:
        arrays = [(npy, vocabulary.vectors)] + ([(own, vocabulary.term_vectors)]
                                                 if vocabulary.term_vectors is not None else [])
        for (final, array), tmp in zip(arrays, tmps):
            with open(tmp, "wb") as f:
                np.save(f, array.astype(np.float32), allow_pickle=False)
            _replace(tmp, final)
        record = {"format_version": FORMAT_VERSION, "stamp": stamp, "params": vocabulary.params,
                  "count": len(vocabulary), "vectors_sha256": _sha256(npy),
                  "terms_sha256": _sha256(own) if vocabulary.term_vectors is not None else None,
                  "terms": vocabulary.terms, "kinds": vocabulary.kinds}
        tmps[2].write_text(json.dumps(record, ensure_ascii=False), encoding="utf-8")
        _replace(tmps[2], meta)
    finally:
        for tmp in tmps:
            if tmp.exists():
                tmp.unlink()


def _own_vectors(folder: Path, record: dict, shape: tuple) -> np.ndarray | None:
    """The terms' own embeddings saved beside a vocabulary, or None when absent or not theirs."""
    path = folder / TERMS_NPY
    try:
        if not record.get("terms_sha256") or not path.is_file() or _sha256(path) != record["terms_sha256"]:
            return None
        own = np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None
    return np.ascontiguousarray(own, dtype=np.float32) if own.shape == shape else None


def load_vocabulary(folder: str | Path, stamp: dict, params: dict | None = None) -> Vocabulary | None:
    """The vocabulary saved in ``folder``, or None when it is missing, unreadable, or belongs
    to another index (``stamp``) or other parameters (``params``, default ``DEFAULT_PARAMS``)."""
    folder = Path(folder)
    meta, npy = folder / VOCABULARY_JSON, folder / VOCABULARY_NPY
    if not (meta.is_file() and npy.is_file()):
        return None
    try:
        record = json.loads(meta.read_text(encoding="utf-8"))
        if (record.get("format_version") != FORMAT_VERSION or record.get("stamp") != stamp
                or record.get("params") != {**DEFAULT_PARAMS, **(params or {})}
                or record.get("vectors_sha256") != _sha256(npy)):
            return None
        vectors = np.load(npy, allow_pickle=False)
    except (OSError, ValueError, TypeError):
        return None
    terms, kinds = list(record.get("terms") or []), list(record.get("kinds") or [])
    if (vectors.ndim != 2 or vectors.shape[0] != len(terms) or len(kinds) != len(terms)
            or vectors.shape[1] != stamp.get("dimensions")):
        return None
    return Vocabulary(terms, kinds, np.ascontiguousarray(vectors, dtype=np.float32), record["params"],
                      _own_vectors(folder, record, vectors.shape))
