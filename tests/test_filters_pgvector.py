"""Filters inside PostgreSQL's search: the filtered top 5 against brute force, dates from ``T_files``."""

from __future__ import annotations

from datetime import date

import pytest

from program.retrieval.filters import DocumentFilter
from program.retrieval.postgres import PgVectorKnowledgeBase
from program.retrieval.scoped import ScopedKnowledgeBase
from tests.test_filters import QUERIES, _brute, help_centre  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow  # starts a server: left out of the inner loop


@pytest.fixture(scope="module")
def pg_help_centre(help_centre, pg_server, embedder):
    from tests.postgres import kb_url

    source = help_centre["flat"].manifest["source_path"]
    kb = PgVectorKnowledgeBase.build(source, kb_url(pg_server), embedder)
    yield kb
    kb.close()


@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_the_filtered_top_5_is_brute_forces(help_centre, pg_help_centre, mode):
    faiss_kb = help_centre["flat"]  # the same chunks and vectors: brute force reads them
    files = sorted(faiss_kb.manifest["files"])
    for flt in (DocumentFilter(paths=((files[0], files[7], files[20]),)), DocumentFilter(paths=(("[a-h]*.md",),)),
                DocumentFilter(modified_since=date(2024, 1, 1)), DocumentFilter(paths=(("*api*",),))):
        within = pg_help_centre.select(flt)
        assert within == faiss_kb.select(flt) and 0 < len(within.files) < len(files)
        for query in QUERIES:
            got = [p.id for p in pg_help_centre.search(query, 5, mode, within=within)]
            assert got == _brute(faiss_kb, query, within, 5, mode), (flt.describe(), query)


def test_a_scoped_database_reads_only_its_documents(pg_help_centre):
    scoped = ScopedKnowledgeBase(pg_help_centre, DocumentFilter(paths=(("api-*",),)))
    assert 0 < len(scoped) < len(pg_help_centre.chunks)
    assert all(c.source_path.split("/")[-1].startswith("api-") for c in scoped.chunks)
    assert all(p.url.split("/")[-1].startswith("api-") for p in scoped.search("chargeback of a payment", 5))
    assert scoped.mentions({"chargeback", "key"}) == {"key"}
    assert pg_help_centre.mentions({"chargeback", "key"}) == {"chargeback", "key"}
    assert ScopedKnowledgeBase(pg_help_centre, DocumentFilter(types=frozenset({"pdf"}))).empty
