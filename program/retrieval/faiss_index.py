"""Construction of the knowledge base's faiss index: exact flat search or approximate HNSW.

Both index types score by inner product over L2-normalised vectors, so scores are cosine
similarities in [-1, 1]:

* ``flat``: ``faiss.IndexFlatIP``, exact, search time linear in the number of vectors.
* ``hnsw``: ``faiss.IndexHNSWFlat(d, M, faiss.METRIC_INNER_PRODUCT)``, a graph of ``M``
  neighbours per node built with ``ef_construction`` candidates; a search explores
  ``ef_search`` candidates (higher: better recall, slower). Approximate: the top hits can
  differ from flat search. Both keep the raw vectors, so :func:`stored_vectors` can rebuild
  one type from the other without embedding again.

:class:`IndexSpec` is what the manifest records under ``"index"``; a saved index whose spec
differs from the requested one is re-indexed.
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

INDEX_TYPES = ("flat", "hnsw")


@dataclass(frozen=True)
class IndexSpec:
    """Which faiss index to build, and its parameters.

    Args:
        type: ``"flat"`` (default, exact) or ``"hnsw"`` (approximate).
        m: HNSW neighbours per node (``M``); ignored for flat.
        ef_construction: HNSW candidate list size while adding vectors; ignored for flat.
        ef_search: HNSW candidate list size per query, must be at least the ``k`` you ask for
            to get ``k`` results reliably; ignored for flat.

    Raises:
        ValueError: unknown type, or a parameter below 1 (``m`` below 2).
    """

    type: str = "flat"
    m: int = 32
    ef_construction: int = 40
    ef_search: int = 64

    def __post_init__(self):
        if self.type not in INDEX_TYPES:
            raise ValueError(f"index type must be one of {', '.join(INDEX_TYPES)}, got {self.type!r}")
        if self.m < 2 or self.ef_construction < 1 or self.ef_search < 1:
            raise ValueError(f"HNSW parameters out of range: m={self.m} (>= 2), "
                             f"ef_construction={self.ef_construction}, ef_search={self.ef_search} (>= 1)")

    @classmethod
    def coerce(cls, spec: "IndexSpec | str | None") -> "IndexSpec":
        """``spec`` itself, or ``IndexSpec(type=spec)`` for a type name, or the flat default for None."""
        if isinstance(spec, IndexSpec):
            return spec
        return cls() if spec is None else cls(type=spec)

    def to_manifest(self) -> dict:
        """The manifest's ``"index"`` entry: ``{"type": "flat", "metric": "inner_product"}``, plus
        ``M``, ``ef_construction`` and ``ef_search`` for HNSW."""
        out = {"type": self.type, "metric": "inner_product"}
        if self.type == "hnsw":
            out.update(M=self.m, ef_construction=self.ef_construction, ef_search=self.ef_search)
        return out

    @classmethod
    def from_manifest(cls, entry: dict | None) -> "IndexSpec":
        """Inverse of :meth:`to_manifest`; a manifest without ``"index"`` (older builds) means flat.

        Raises:
            ValueError: unknown type or out-of-range parameters.
        """
        if not entry:
            return cls()
        if entry.get("type") != "hnsw":
            return cls(type=entry.get("type"))
        return cls("hnsw", int(entry["M"]), int(entry["ef_construction"]), int(entry["ef_search"]))


def new_index(spec: IndexSpec, dimensions: int) -> faiss.Index:
    """An empty index of ``spec``'s type for vectors of ``dimensions`` floats."""
    if spec.type == "flat":
        return faiss.IndexFlatIP(dimensions)
    index = faiss.IndexHNSWFlat(dimensions, spec.m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = spec.ef_construction
    index.hnsw.efSearch = spec.ef_search
    return index


def build_index(spec: IndexSpec, vectors: np.ndarray) -> faiss.Index:
    """An index of ``spec`` holding ``vectors`` (row i gets id i).

    Args:
        vectors: array of shape ``(n, d)``, L2-normalised rows (converted to contiguous float32).

    Raises:
        ValueError: ``vectors`` is not two-dimensional.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    if vectors.ndim != 2:
        raise ValueError(f"vectors must have shape (n, d), got {vectors.shape}")
    index = new_index(spec, vectors.shape[1])
    if len(vectors):
        index.add(vectors)
    return index


def spec_of(index: faiss.Index) -> str:
    """The type name of a loaded index (``"flat"``, ``"hnsw"``), or its faiss class name if neither."""
    if isinstance(index, faiss.IndexHNSWFlat):
        return "hnsw"
    return "flat" if isinstance(index, faiss.IndexFlatIP) else type(index).__name__


def apply_search_params(index: faiss.Index, spec: IndexSpec) -> None:
    """Set query-time parameters (HNSW ``efSearch``) of a loaded index from ``spec``."""
    if spec.type == "hnsw":
        index.hnsw.efSearch = spec.ef_search


def stored_vectors(index: faiss.Index) -> np.ndarray:
    """All vectors of a flat or HNSW index, shape ``(ntotal, d)``, float32, in id order."""
    return index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
