"""What is learned about a knowledge base follows it: in the per-user state folder for a faiss one
(never beside the compile), in the database beside a PostgreSQL one's chunks, where every app
server over it reads the same judges and operating point."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from program.app.compiled import load_confidence, operating_point_source
from program.judges.adapted import adapted_state, compile_namespace, load_adapted, write_judges
from program.judges.operating_point import OperatingPoint, save_operating_point
from program.judges.store import corpus_key, load_judges
from program.retrieval import KnowledgeBase
from program.state import FolderState
from tests.test_retrieval import write_corpus

ROOT = Path(__file__).resolve().parent.parent


def _adapted(kb):
    """The compile's judges, marked as adapted to ``kb``'s documents now."""
    judges = load_judges(ROOT / "compiled")
    return replace(judges, adapted={"corpus": corpus_key(kb), "name": "docs", "stamp": "x"})


def test_a_folder_state_writes_whole_blobs_and_its_stamp_moves(tmp_path):
    state = FolderState(tmp_path / "s")
    assert state.read("a.json") is None and state.stamp() == ""
    state.write("a.json", '{"x": 1}')
    first = state.stamp()
    assert state.read("a.json") == b'{"x": 1}' and first
    state.write("a.json", b'{"x": 2}')
    assert state.read("a.json") == b'{"x": 2}' and state.stamp() != first
    assert [p.name for p in (tmp_path / "s").iterdir()] == ["a.json"]  # no temporary file left


def test_a_faiss_knowledge_base_keeps_its_state_in_the_state_folder_by_where_it_lives(tmp_path, embedder,
                                                                                      monkeypatch):
    monkeypatch.setenv("CRAG_STATE_DIR", str(tmp_path / "state"))
    kb = KnowledgeBase.build(write_corpus(tmp_path / "docs"), tmp_path / "index", embedder)
    state = adapted_state(ROOT / "compiled", kb)
    assert state.folder.parent.parent == tmp_path / "state" / "knowledge-bases"
    assert state.folder.name == compile_namespace(ROOT / "compiled") and state.folder.name.startswith("compiled-")
    write_judges(_adapted(kb), state)
    assert load_adapted(ROOT / "compiled", kb).adapted["name"] == "docs"
    # the same index, opened again, finds them; another build of it does not (fit on other documents)
    assert load_adapted(ROOT / "compiled", KnowledgeBase.load(tmp_path / "index")) is not None
    (tmp_path / "docs" / "cats.md").write_text("# Cats\n\nCats sleep most of the day.\n")
    changed = KnowledgeBase.build(tmp_path / "docs", tmp_path / "index", embedder)
    assert adapted_state(ROOT / "compiled", changed).folder == state.folder
    assert load_adapted(ROOT / "compiled", changed) is None
    assert not (ROOT / "compiled" / "adapted").exists() or not any((ROOT / "compiled" / "adapted").rglob(
        "judges.json"))  # nothing written beside the compile


@pytest.mark.slow  # a PostgreSQL server
def test_a_postgres_knowledge_base_keeps_its_state_in_its_database_for_every_app_server(tmp_path, pg_url,
                                                                                       embedder):
    from program.retrieval.postgres import PgVectorKnowledgeBase

    corpus = write_corpus(tmp_path / "docs")
    with PgVectorKnowledgeBase.build(corpus, pg_url, embedder) as writer, \
            PgVectorKnowledgeBase.connect(pg_url, embedder) as other_server:
        state = adapted_state(ROOT / "compiled", writer)
        assert state.where.startswith(f"table {writer.url.table}_state of ")
        assert state.read("judges.json") is None and state.stamp() == ""
        write_judges(_adapted(writer), state)
        save_operating_point(OperatingPoint(0.37, 0.1, 30, 30, 0.6), state)
        # another app server over the same table (its own connection pool) reads what the first wrote
        assert load_adapted(ROOT / "compiled", other_server).adapted["name"] == "docs"
        assert load_confidence(ROOT / "compiled", other_server)[1] == 0.37
        assert operating_point_source(ROOT / "compiled", other_server) == \
            f"written questions, {state.where}/operating_point.json"
        stamp = adapted_state(ROOT / "compiled", other_server).stamp()
        save_operating_point(OperatingPoint(0.41, 0.1, 30, 30, 0.6), state)
        assert adapted_state(ROOT / "compiled", other_server).stamp() != stamp  # what serve's reload watches
        assert json.loads(state.read("operating_point.json"))["accept"] == 0.41
        # another compile's namespace holds nothing of it
        assert adapted_state(tmp_path / "another-compile", other_server).read("judges.json") is None


@pytest.mark.slow  # a PostgreSQL server
def test_serve_switches_to_a_postgres_knowledge_base_indexed_again_and_to_judges_adapted_again(tmp_path, pg_url,
                                                                                              embedder, fake_lm):
    """What ``serve``'s reloader does for a PostgreSQL knowledge base: its search already reads the
    live rows; a new generation, or judges written into its state, builds the program again."""
    from types import SimpleNamespace

    from program.app.cli import _parser
    from program.app.service.reload import Watched, reload_if_new, signature
    from program.app.service.run import served_knowledge_bases
    from program.app.startup import check_setup, program_for
    from program.retrieval.postgres import PgVectorKnowledgeBase

    corpus = write_corpus(tmp_path / "docs")
    PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()
    (_, flags), = served_knowledge_bases(_parser().parse_args(["serve", "--kb", pg_url, "--web", "none"]))
    config = check_setup(flags)
    with PgVectorKnowledgeBase.connect(pg_url, embedder) as kb:
        runner = SimpleNamespace(program=program_for(flags, config, kb, decide_retrieval=True, quiet=True))
        infos: dict = {}
        describe = lambda p: {"knowledge_base": {"chunks": len(p.knowledge_base)}}  # noqa: E731
        watched = Watched("docs", runner, flags, config, describe, infos, loaded=signature(kb, flags))
        assert reload_if_new(watched) is False  # nothing moved
        (corpus / "cats.md").write_text("# Cats\n\nCats sleep for most of the day.\n")
        PgVectorKnowledgeBase.build(corpus, pg_url, embedder).close()  # another indexer: a new generation
        old = runner.program
        assert reload_if_new(watched) is True and runner.program is not old and watched.reloads == 1
        assert infos["docs"]["knowledge_base"]["reloads"] == 1
        write_judges(_adapted(kb), adapted_state(ROOT / "compiled", kb))  # judges adapted again elsewhere
        assert reload_if_new(watched) is True and watched.reloads == 2
        assert runner.program.judges_report()["adapted"] is True
