"""Progress on long work: building a knowledge base shows its bars (files read, chunks and terms
embedded, rate, time left) in ``index``, in ``ask``'s first run and in ``serve``'s start; reusing it
shows none."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.service_process import ROOT, program_env, write_docs

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

# tqdm's line: "embedding chunks: 100%|██████████| 2/2 [00:01<00:00,  1.52chunks/s]" (elapsed<left, rate;
# "2.71s/chunks" below one a second)
BAR = r"{what}: 100%\|[^|]*\| {n}/{n} \[\d\d:\d\d<\d\d:\d\d, +[\d.]+({unit}/s|s/{unit})\]"


def bars(stderr: str) -> list[str]:
    return [line.strip() for line in re.split(r"[\r\n]", stderr) if "100%" in line]


def test_ask_shows_the_build_on_its_first_run_only(served_fake_lm, tmp_path):
    docs = write_docs(tmp_path / "docs")
    argv = [sys.executable, "-m", "program", "ask", "Who founded Acme Rockets?", "--model", "openai/fake",
            "--api-base", served_fake_lm.base, "--kb", str(docs), "--compiled", "none", "--web", "none"]
    env = program_env(tmp_path / "cache", CRAG_PROGRESS="1")
    first = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    shown = bars(first.stderr)
    assert re.fullmatch(BAR.format(what="reading files", n=2, unit="files"), shown[0]), shown
    assert any(re.fullmatch(BAR.format(what="embedding chunks", n=2, unit="chunks"), b) for b in shown), shown
    assert any(re.fullmatch(BAR.format(what="embedding terms", n=r"\d+", unit="terms"), b) for b in shown), shown
    assert first.stdout.startswith("Acme Rockets was founded by Jane Roe [1].")
    again = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and bars(again.stderr) == []  # the index is reused: nothing to wait for


def test_index_shows_no_bar_in_a_pipe_unless_asked(tmp_path):
    docs = write_docs(tmp_path / "docs")
    env = program_env(tmp_path / "cache")
    env.pop("CRAG_PROGRESS", None)
    run = subprocess.run([sys.executable, "-m", "program", "index", str(docs), "--out", str(tmp_path / "index"),
                          "--no-adapt"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and bars(run.stderr) == [] and "embedding" not in run.stderr


def test_serve_shows_the_build_when_it_starts(service):
    shown = bars(service.log.read_text())
    assert any(re.fullmatch(BAR.format(what="embedding chunks", n=2, unit="chunks"), b) for b in shown), shown
