"""Filters that narrow a question: their rules, and the filtered top k against brute force (faiss)."""

import os
import shutil
from datetime import date, datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from program.retrieval import KnowledgeBase
from program.retrieval.faiss_index import stored_vectors
from program.retrieval.filters import DocumentFilter, FilterError, Within, select
from program.retrieval.fusion import HYBRID, rrf
from program.retrieval.lexical import tokens
from program.retrieval.scoped import ScopedKnowledgeBase

HELP_CENTRE = Path(__file__).parent.parent / "eval_sets" / "adversarial" / "kb"
QUERIES = ["How do I rotate an API key?", "refund of a disputed payment", "3DS authentication failed",
           "close my account", "webhook signature"]


# ---------------------------------------------------------------------------- the filter's rules
@pytest.mark.parametrize("bad, field", [
    ({"paths": ["/etc/passwd"]}, "paths"), ({"paths": ["../other-kb/*"]}, "paths"), ({"paths": ["a/../../b"]}, "paths"),
    ({"paths": ["C:/x"]}, "paths"), ({"paths": [""]}, "paths"), ({"paths": [3]}, "paths"),
    ({"paths": ["{a,b}" * 12]}, "paths"), ({"paths": ["a" * 300]}, "paths"),
    ({"types": ["p df"]}, "types"), ({"pages": "10-3"}, "pages"), ({"pages": "x"}, "pages"), ({"pages": 0}, "pages"),
    ({"pages": True}, "pages"), ({"modified_since": "last week"}, "modified_since"),
    ({"folder": "a"}, "filter"), ([], "filter")])
def test_a_bad_filter_is_one_line_naming_its_field(bad, field):
    with pytest.raises(FilterError) as err:
        DocumentFilter.parse(bad)
    assert str(err.value).startswith(f"{field}:") and "\n" not in str(err.value)


def test_parse_normalises_and_keeps_what_it_says():
    flt = DocumentFilter.parse({"paths": "./runbooks/", "types": [".PDF", "md"], "pages": "3-10",
                                "modified_since": "2024-01-01", "modified_until": "2024-12-31"})
    assert flt.paths == (("runbooks/**",),) and flt.types == {"pdf", "md"} and flt.pages == (3, 10)
    assert flt.to_dict() == {"paths": [["runbooks/**"]], "types": ["md", "pdf"], "pages": "3-10",
                             "modified_since": "2024-01-01", "modified_until": "2024-12-31"}
    assert flt.describe() == "path runbooks/**; type md or pdf; pages 3-10; modified 2024-01-01..2024-12-31"
    assert DocumentFilter.parse({}) is None and DocumentFilter.parse(None) is None


def test_globs_match_within_folders_and_across_with_double_star():
    flt = DocumentFilter(paths=(("hr/*.md", "runbooks/**"),))
    assert flt.keeps_file("hr/leave.md") and flt.keeps_file("runbooks/db/restore.md")
    assert not flt.keeps_file("hr/2024/leave.md") and not flt.keeps_file("finance/hr/leave.md")
    assert DocumentFilter(types=frozenset({"pdf"})).keeps_file("a/b.PDF")


def test_dates_compare_by_utc_day_and_an_unrecorded_date_is_left_out():
    flt = DocumentFilter(modified_since=date(2024, 1, 1), modified_until=date(2024, 12, 31))
    assert flt.keeps_file("a.md", datetime(2024, 12, 31, 23, 59, tzinfo=timezone.utc))
    assert not flt.keeps_file("a.md", datetime(2025, 1, 1, 0, 0, tzinfo=timezone.utc))
    assert not flt.keeps_file("a.md", None)


PATHS = ["hr/leave.md", "hr/pay.pdf", "runbooks/db.md", "runbooks/net/dns.md", "finance/q1.xlsx", "readme.md"]
filters = st.builds(
    DocumentFilter,
    paths=st.lists(st.lists(st.sampled_from(["hr/*", "runbooks/**", "*.md", "**/*.md", "finance/*", "**"]),
                            min_size=1, max_size=2).map(tuple), max_size=2).map(tuple),
    types=st.none() | st.sets(st.sampled_from(["md", "pdf", "xlsx"])).map(frozenset),
    pages=st.none() | st.tuples(st.integers(1, 5), st.integers(5, 9)),
    modified_since=st.none() | st.dates(date(2023, 1, 1), date(2025, 1, 1)))


@settings(max_examples=150, deadline=None)
@given(filters, filters, st.dates(date(2023, 1, 1), date(2025, 1, 1)), st.integers(0, 12))
def test_an_intersection_never_keeps_what_either_filter_drops(a, b, day, page):
    both = a & b
    modified = datetime(day.year, day.month, day.day, 12, tzinfo=timezone.utc)
    for path in PATHS:
        assert both.keeps_file(path, modified) == (a.keeps_file(path, modified) and b.keeps_file(path, modified))
    assert both.keeps_page(page) <= (a.keeps_page(page) and b.keeps_page(page))
    if not both.nothing:
        assert both.keeps_page(page) == (a.keeps_page(page) and b.keeps_page(page))


def test_disjoint_page_ranges_or_types_keep_nothing():
    assert (DocumentFilter(pages=(1, 3)) & DocumentFilter(pages=(5, 9))).nothing
    empty = DocumentFilter(types=frozenset({"pdf"})) & DocumentFilter(types=frozenset({"md"}))
    assert empty.nothing and select(empty, {"a.pdf": None}).empty


# ---------------------------------------------------------------------------- faiss, against brute force
@pytest.fixture(scope="module")
def help_centre(tmp_path_factory, embedder):
    root = tmp_path_factory.mktemp("help-centre")
    corpus = root / "kb"
    shutil.copytree(HELP_CENTRE, corpus)
    for i, f in enumerate(sorted(corpus.glob("*.md"))):  # a modification date per file: 2023 for half, 2024 the rest
        stamp = datetime(2023 + i % 2, 6, 1, tzinfo=timezone.utc).timestamp()
        os.utime(f, (stamp, stamp))
    return {kind: KnowledgeBase.build(corpus, root / kind, embedder, index=kind) for kind in ("flat", "hnsw")}


def _brute(kb, query: str, within: Within, k: int, mode: str) -> list[str]:
    """The filtered top k, scoring every kept chunk: cosine over the stored vectors, BM25 over the
    whole index masked to the kept chunks, fused as hybrid search fuses (``HYBRID``)."""
    kept = np.array([(within.files is None or f in within.files) for f in _files_of(kb)], dtype=bool)
    if within.pages is not None:
        kept &= np.array([within.pages[0] <= c.page <= within.pages[1] for c in kb.chunks])
    q = kb.embedder.encode([query])[0]
    cos = stored_vectors(kb._index) @ q
    positions = np.flatnonzero(kept)
    depth = min(len(positions), k if mode == "dense" else max(k, HYBRID.depth))
    dense = list(positions[np.argsort(-cos[positions], kind="stable")][:depth])
    if mode == "dense":
        order = dense
    else:
        bm = np.asarray(kb.lexical._bm25.get_scores([t for t in dict.fromkeys(tokens(query))
                                                      if t in kb.lexical._bm25.vocab_dict]))[:len(kb.chunks)]
        hits = [i for i in positions if bm[i] > 0]
        lexical = sorted(hits, key=lambda i: (-bm[i], i))[:depth]
        order = lexical if mode == "lexical" else [i for i, _ in rrf([dense, lexical], [HYBRID.dense, HYBRID.lexical],
                                                                     HYBRID.k)]
    return [kb.chunks[i].chunk_id for i in order[:k]]


def _files_of(kb) -> list[str]:
    return [name for name, count in kb.manifest["file_chunks"].items() for _ in range(count)]


@pytest.mark.parametrize("kind", ["flat", "hnsw"])
@pytest.mark.parametrize("mode", ["dense", "lexical", "hybrid"])
def test_the_filtered_top_5_is_brute_forces(help_centre, kind, mode):
    kb = help_centre[kind]
    files = sorted(kb.manifest["files"])
    for flt in (DocumentFilter(paths=((files[0], files[7], files[20]),)), DocumentFilter(paths=(("[a-h]*.md",),)),
                DocumentFilter(modified_since=date(2024, 1, 1)), DocumentFilter(paths=(("*api*",),))):
        within = kb.select(flt)
        assert within.files and len(within.files) < len(files)
        for query in QUERIES:
            got = [p.id for p in kb.search(query, 5, mode, within=within)]
            assert got == _brute(kb, query, within, 5, mode), (flt.describe(), query)
            assert all(_files_of(kb)[[c.chunk_id for c in kb.chunks].index(i)] in within.files for i in got)


def test_dates_recorded_at_index_time_select_files(help_centre):
    kb = help_centre["flat"]
    dates = kb.file_dates()
    assert set(dates) == set(kb.manifest["files"]) and all(d is not None for d in dates.values())
    in_2024 = kb.select(DocumentFilter(modified_since=date(2024, 1, 1)))
    assert len(in_2024.files) == len(dates) // 2 and all(dates[f].year == 2024 for f in in_2024.files)


def test_a_scoped_knowledge_base_reads_only_its_documents(help_centre):
    kb = help_centre["flat"]
    scoped = ScopedKnowledgeBase(kb, DocumentFilter(paths=(("api-*",),)))
    assert 0 < len(scoped) < len(kb) and all(c.source_path.split("/")[-1].startswith("api-") for c in scoped.chunks)
    assert all(p.url.split("/")[-1].startswith("api-") for p in scoped.search("refund a payment", 5))
    assert kb.mentions({"chargeback", "key"}) == {"chargeback", "key"}
    assert scoped.mentions({"chargeback", "key"}) == {"key"}
    terms = scoped.candidate_terms("chargeback of a disputed payment", 12)
    assert not any("chargeback" in t.lower() or "dispute" in t.lower() for t in terms)
    assert terms and all(set(t.lower().split()) <= scoped.mentions(set(t.lower().split())) for t in terms)
    assert ScopedKnowledgeBase(kb, DocumentFilter(paths=(("nothing-here/**",),))).empty


# ---------------------------------------------------------------------------- CRAG reading through a filter
def test_crag_narrowed_reads_only_the_filter_and_says_the_web_is_not_filtered(help_centre, fake_lm):
    from program.stages.crag import CRAG
    from tests.conftest import FakeWeb, first_strip
    from signatures import GenerateAnswer

    fake_lm.rules[GenerateAnswer] = first_strip
    program = CRAG(help_centre["flat"], web=FakeWeb([("https://example.com/a", "Refunds take ten days.")]),
                   self_check=False)
    refunds = DocumentFilter(paths=(("refunds*.md",),))
    result = program.narrowed(program.settings, documents=refunds)(question="How long does a refund take?")
    assert result.filter == {"paths": [["refunds*.md"]]}
    assert {g.passage_id.split("#")[0] for g in result.grades} <= {"refunds.md", "refunds-faq.md"}
    assert "filter: path refunds*.md" in result.trace.events
    assert "the web search is not filtered: web pages may be read" in result.trace.events
    unfiltered = program(question="How long does a refund take?")
    assert unfiltered.filter == {} and not any(e.startswith("filter:") for e in unfiltered.trace.events)


def test_a_scoped_reader_keeps_only_the_demos_its_documents_hold(help_centre, fake_lm):
    from program.stages.crag import CRAG

    kb = help_centre["flat"]
    refund = {"question": "Can I refund part of a payment?", "context": ["[1] ..."],
              "answer": "You can refund a payment in full or in part from the Dashboard"}
    api = {"question": "How do I create an API key?", "context": ["[1] ..."],
           "answer": "Create API keys in the Dashboard under Developers"}
    program = CRAG(kb)
    reader = program.generator.generate
    reader.load_state({**reader.dump_state(), "demos": [refund, api]})  # as a compile with these demos loads
    assert [d["question"] for d in program.generator.generate.demos] == [refund["question"], api["question"]]
    scoped = program.narrowed(program.settings, documents=DocumentFilter(paths=(("refunds*.md",),)))
    assert [d["question"] for d in scoped.generator.generate.demos] == [refund["question"]]
    nothing = program.narrowed(program.settings, documents=DocumentFilter(types=frozenset({"pdf"})))
    assert nothing.generator.generate.demos == []
    assert [d["question"] for d in program.generator.generate.demos] == [refund["question"], api["question"]]


def test_a_filter_on_a_knowledge_base_that_cannot_filter_is_a_clear_error():
    from program.stages.crag import CRAG
    from tests.conftest import FOUNDING, ListKnowledgeBase

    program = CRAG(ListKnowledgeBase([FOUNDING]))
    with pytest.raises(TypeError, match="ListKnowledgeBase cannot read part of itself: filters need a faiss or "
                                        "PostgreSQL knowledge base"):
        program.narrowed(program.settings, documents=DocumentFilter(types=frozenset({"md"})))
