"""The retrieval benchmark (``experiments/bench_retrieval.py``): its hybrid types run on a tiny corpus
against a real PostgreSQL (the ``pgserver`` wheel), and the table keeps its columns without them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from experiments import bench_retrieval as bench
from program.retrieval.fusion import HYBRID

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

OLD_HEADER = ("| chunks | index | embed/s | add/s | build/s | ms median | ms p90 | ms median (+embed) "
              "| ms p90 (+embed) | recall@10 |")


def test_agreement_is_the_share_of_equal_top5_sets_and_the_mean_overlap():
    a = np.array([[1, 2, 3, 4, 5, 9], [1, 2, 3, 4, 5, 9]])
    b = np.array([[5, 4, 3, 2, 1, 0], [1, 2, 3, 4, 6, 5]])  # same set in another order; 4 of 5
    assert bench.agreement(a, b) == (0.5, 0.9)
    assert bench.agreement(a, a) == (1.0, 1.0)


def test_without_a_hybrid_type_the_table_keeps_its_columns():
    row = {"chunks": 10000, "index": "flat", "embed/s": 13.1, "add/s": 4360662, "build/s": 13.1, "ms median": 1.7,
           "ms p90": 2.0, "ms median (+embed)": 16.8, "ms p90 (+embed)": 20.7, "recall@k": 1.0}
    assert bench.markdown([row], 10).splitlines() == [OLD_HEADER, "|---|---|---|---|---|---|---|---|---|---|",
                                                      "| 10,000 | flat | 13.1 | 4,360,662 | 13.1 | 1.7 | 2.0 | 16.8 "
                                                      "| 20.7 | 1.0 |"]


def test_unknown_types_and_a_k_below_5_with_hybrid_types_are_refused(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--types", "flat,bm25"])
    assert "index type must be one of flat, hnsw, pgvector, hybrid, hnsw-hybrid, pg-hybrid, got 'bm25'" \
           in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.parse_args(["--types", "hybrid", "--k", "3", "--sizes", "100"])
    assert "the hybrid types need --k >= 5" in capsys.readouterr().err
    assert bench.parse_args(["--types", "flat,hnsw,pgvector", "--k", "3", "--sizes", "100"]).k == 3


def test_hybrid_types_report_build_latency_and_agreement_on_a_tiny_corpus(tmp_path, monkeypatch, pg_server, capsys):
    monkeypatch.setattr(bench, "CACHE_DIR", tmp_path / "cache")
    types = ["flat", "hybrid", "hnsw-hybrid", "pgvector", "pg-hybrid"]
    assert bench.main(["--sizes", "120", "--types", ",".join(types), "--queries", "8", "--embed-max", "30",
                       "--pg-url", pg_server.get_uri(), "--out", str(tmp_path / "out")]) == 0
    result = json.loads(next((tmp_path / "out").glob("*.json")).read_text())
    rows = {r["index"]: r for r in result["rows"]}
    assert list(rows) == types and result["fusion"] == HYBRID.to_manifest()
    for kind in bench.HYBRID_TYPES:
        r = rows[kind]
        assert r["recall@k"] is None and r["chunks"] == 120
        for key in ("add/s", "build/s", "ms median", "ms p90", "ms median (+embed)", "ms p90 (+embed)",
                    "dense ms median", "dense ms p90", "lexical s"):
            assert r[key] > 0, (kind, key)
        assert r["ms p90"] >= r["ms median"] and r["dense ms p90"] >= r["dense ms median"]
        assert r["ms median (+embed)"] > r["ms median"]
    # same chunks, vectors, BM25 and fusion: at 120 chunks pgvector's HNSW sees every candidate
    for kind in ("hybrid", "hnsw-hybrid"):
        assert (rows[kind]["top-5 same"], rows[kind]["top-5 overlap"], rows[kind]["agreement_with"]) == \
               (1.0, 1.0, "pg-hybrid")
    assert rows["pg-hybrid"]["top-5 same"] is None
    assert not set(bench.HYBRID_COLUMNS) & (set(rows["flat"]) | set(rows["pgvector"]))  # old rows unchanged
    assert rows["flat"]["recall@k"] == 1.0 and 0 <= rows["pgvector"]["recall@k"] <= 1
    table = result["table"].splitlines()
    assert table[0] == OLD_HEADER + " lexical s | dense ms median | dense ms p90 | top-5 same | top-5 overlap |"
    assert table[2].endswith("| 1.0 | — | — | — | — | — |") and table[3].endswith("| 1.0 | 1.0 |")
    assert result["table"] in capsys.readouterr().out
