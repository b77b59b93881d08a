"""A team's own knowledge base has no web behind it unless asked: the PopQA Wikipedia snapshot is
the web only for the PopQA knowledge base (``program.app.resources.default_web``)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from program.app import resources
from program.app.startup import web_config
from program.paths import DEFAULT_KB_SOURCE
from tests.service_process import ROOT, program_env, write_docs


def _flags(**given):
    flags = {"web": None, "kb": None, "searx_url": None, "web_allow": None, "web_block": None,
             "allow_private_urls": False}
    return argparse.Namespace(**{**flags, **given})


def test_the_snapshot_is_the_web_of_popqa_only(tmp_path):
    assert resources.default_web(None) == "snapshot"
    assert resources.default_web(DEFAULT_KB_SOURCE) == "snapshot"
    assert resources.default_web(tmp_path) == "none"
    assert resources.default_web("postgresql://u@h:5432/db?table=docs") == "none"


def test_ask_with_a_kb_of_your_own_and_no_web_flag_gets_no_web(tmp_path, monkeypatch):
    monkeypatch.delenv("CRAG_WEB", raising=False)
    monkeypatch.delenv("CRAG_KB", raising=False)
    assert web_config(_flags(kb=str(tmp_path))).backend == "none"
    assert web_config(_flags()).backend == "snapshot"
    assert web_config(_flags(kb=str(tmp_path), web="snapshot")).backend == "snapshot"  # asked for
    monkeypatch.setenv("CRAG_WEB", "wikipedia")
    assert web_config(_flags(kb=str(tmp_path))).backend == "wikipedia"


def test_the_python_api_gives_a_kb_of_your_own_no_web(tmp_path, monkeypatch):
    from tests.conftest import ListKnowledgeBase

    monkeypatch.delenv("CRAG_WEB", raising=False)
    assert resources.resolve_web("default", ListKnowledgeBase([])) is None
    assert resources.resolve_web("default", None) is not None  # PopQA: the snapshot


@pytest.mark.slow
def test_ask_kb_dir_never_reads_the_popqa_snapshot(tmp_path, served_fake_lm):
    docs = write_docs(tmp_path / "d")
    env = program_env(tmp_path / "cache")
    # a question the fake knowledge base cannot answer takes the corrective path: with a web it would search it
    run = subprocess.run([sys.executable, "-m", "program", "ask", "What is the capital of Mongolia?", "--kb", str(docs),
                          "--model", "openai/fake", "--api-base", served_fake_lm.base, "--compiled", "none",
                          "--no-cache", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    import json

    result = json.loads(run.stdout)
    assert result["trace"]["web"] == []
    plain = subprocess.run([sys.executable, "-m", "program", "ask", "Who founded Acme Rockets?", "--kb", str(docs),
                            "--model", "openai/fake", "--api-base", served_fake_lm.base, "--compiled", "none",
                            "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "web: none (the default for a knowledge base of your own; --web NAME adds one)" in plain.stdout.splitlines()
