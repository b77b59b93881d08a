"""Nothing half-written: ``index`` and the compile's save killed (SIGKILL, real subprocesses) at
chosen and at random points, and a full disk (a small tmpfs), leave the previous index and compile,
which still load and answer."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from program.app.compiled import save_compiled

from program.app.configuration import load_compiled
from program.retrieval import KnowledgeBase
from program.stages.crag import CRAG
from tests.conftest import FOUNDING, ListKnowledgeBase
from tests.service_process import ROOT, program_env

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

QUESTION = "Who founded Acme Rockets?"
ANSWER = "Acme Rockets was founded by Jane Roe [1]."
WORDS = "rocket engine orbit fuel launch crew station module payload thrust nozzle stage".split()


def write_corpus(folder: Path, documents: int, seed: int) -> Path:
    """``documents`` Markdown files of ~6 chunks each, plus the Acme page every version shares."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "acme.md").write_text(f"# Acme Rockets\n\n{FOUNDING}\n")
    for i in range(documents):
        paragraphs = [" ".join(rng.choice(WORDS) for _ in range(110)) + "." for _ in range(6)]
        (folder / f"doc{i}.md").write_text(f"# Engines {i}\n\n" + "\n\n".join(paragraphs))
    return folder


def answer_from(kb, fake_lm) -> str:
    return CRAG(kb, web=None)(question=QUESTION).answer


class Process:
    """A subprocess whose stderr is read as it comes (tqdm's carriage returns included)."""

    def __init__(self, argv, env):
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = b""
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        while chunk := os.read(self.proc.stderr.fileno(), 4096):
            self.err += chunk

    def wait_for(self, pattern: bytes, timeout: float = 120) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if re.search(pattern, self.err):
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.005)
        raise AssertionError(f"{pattern!r} never came: {self.err[-500:]!r}")

    def kill(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        code = self.proc.wait(30)
        self.reader.join(5)
        return code


@pytest.fixture(scope="module")
def previous_index(tmp_path_factory, embedder):
    """A built index of version 1 (two documents) and the corpus folder, already holding version 2."""
    root = tmp_path_factory.mktemp("kill-index")
    docs = write_corpus(root / "docs", 2, seed=1)
    out = root / "index"
    KnowledgeBase.build(docs, out, embedder)
    v1 = json.loads((out / "manifest.json").read_text())
    write_corpus(docs, 6, seed=2)  # version 2: more documents, so the build takes a while
    return docs, out, v1


PHASES = {
    "while reading and loading the model": rb"reading files",
    "while embedding chunks": rb"embedding chunks:[^\r\n]*\| *[1-9]\d*/",
    "while embedding terms": rb"embedding terms",
    "while writing": rb"embedding terms: 100%",
}


@pytest.mark.parametrize("phase", list(PHASES))
def test_index_killed_leaves_the_previous_index_loadable_and_answering(phase, previous_index, embedder, fake_lm):
    docs, out, v1 = previous_index
    env = program_env(out.parent / "cache", CRAG_PROGRESS="1")
    process = Process([sys.executable, "-m", "program", "index", str(docs), "--out", str(out), "--no-adapt"], env)
    reached = process.wait_for(PHASES[phase])
    if phase == "while writing":
        time.sleep(random.Random(7).uniform(0, 0.03))  # somewhere in the write and the swap
    code = process.kill()
    assert reached and (code == -signal.SIGKILL or phase == "while writing"), (code, process.err[-300:])
    kb = KnowledgeBase.load(out, embedder)
    if code == -signal.SIGKILL:
        assert kb.manifest["created"] == v1["created"] or phase == "while writing"  # killed before the swap: version 1
    assert len(kb) == kb.manifest["chunk_count"] and answer_from(kb, fake_lm) == ANSWER


def test_index_write_killed_at_random_points_never_leaves_a_broken_index(tmp_path, embedder, fake_lm):
    """A process swapping two built indexes into one folder over and over, killed ten times."""
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "index"
    KnowledgeBase.build(write_corpus(tmp_path / "docs-a", 1, seed=3), a, embedder)
    KnowledgeBase.build(write_corpus(tmp_path / "docs-b", 2, seed=4), b, embedder)
    versions = {json.loads((d / "manifest.json").read_text())["created"] + str(n): n
                for n, d in ((KnowledgeBase.load(a).manifest["chunk_count"], a),
                             (KnowledgeBase.load(b).manifest["chunk_count"], b))}
    writer = ("import itertools, sys\n"
              "from program.retrieval.index import KnowledgeBase, _write_atomic\n"
              "a, b = KnowledgeBase.load(sys.argv[1]), KnowledgeBase.load(sys.argv[2])\n"
              "print('writing', file=sys.stderr, flush=True)\n"
              "for kb in itertools.cycle([a, b]):\n"
              "    _write_atomic(kb.index_dir.parent / 'index', kb._index, kb.chunks, kb.manifest, None)\n")
    rng = random.Random(15)
    for _ in range(10):
        process = Process([sys.executable, "-c", writer, str(a), str(b)], program_env(tmp_path / "cache"))
        assert process.wait_for(rb"writing")
        time.sleep(rng.uniform(0.02, 0.4))
        assert process.kill() == -signal.SIGKILL
        kb = KnowledgeBase.load(out, embedder)  # puts back an index a kill left beside the folder
        assert kb.manifest["created"] + str(len(kb)) in versions  # one whole version, never a mix
        assert answer_from(kb, fake_lm) == ANSWER
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".index.")]  # dead writers' leftovers removed


def test_compile_save_killed_at_random_points_never_leaves_a_broken_compile(tmp_path, fake_lm):
    """A process saving two compiles into one folder over and over, killed ten times: the folder
    always loads as one of them, its thresholds with its own prompts."""
    folder = tmp_path / "compiled"
    saver = ("import itertools, sys, dspy\n"
             "from program.app.compiled import save_compiled\n"
             "from program.stages.crag import CRAG\n"
             "a, b = CRAG(None), CRAG(None)\n"
             "a.generator.generate.demos = [dspy.Example(question='q', context=['c'], answer='a')]\n"
             "print('saving', file=sys.stderr, flush=True)\n"
             "for program, lower in itertools.cycle([(a, 0.1), (b, 0.3)]):\n"
             "    save_compiled(program, {'lm': 'fake', 'thresholds': {'lower': lower, 'upper': 0.7}}, sys.argv[1])\n")
    save_compiled(CRAG(None), {"lm": "fake", "thresholds": {"lower": 0.3, "upper": 0.7}}, folder)
    rng = random.Random(16)
    for _ in range(10):
        process = Process([sys.executable, "-c", saver, str(folder)], program_env(tmp_path / "cache"))
        assert process.wait_for(rb"saving")
        time.sleep(rng.uniform(0.02, 0.3))
        assert process.kill() == -signal.SIGKILL
        program = load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
        demos = len(program.generator.generate.demos)
        assert (program.settings.lower, demos) in {(0.1, 1), (0.3, 0)}  # the manifest always belongs to its state
        assert program(question=QUESTION).answer == ANSWER


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs (root only): ``(mount point, fill(free_bytes))``."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True,
                          text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")

    def fill(free: int) -> None:
        stat = os.statvfs(mount)
        size = stat.f_bavail * stat.f_frsize - free
        (mount / "filler").write_bytes(b"\0" * max(0, size))

    yield mount, fill
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_index_on_a_full_disk_fails_in_one_line_and_keeps_the_previous_index(small_disk, tmp_path, embedder, fake_lm):
    mount, fill = small_disk
    docs = write_corpus(tmp_path / "docs", 0, seed=5)
    out = mount / "index"
    KnowledgeBase.build(docs, out, embedder)
    before = (out / "manifest.json").read_bytes()
    write_corpus(docs, 3, seed=6)
    fill(16 * 1024)
    run = subprocess.run([sys.executable, "-m", "program", "index", str(docs), "--out", str(out), "--no-adapt"],
                         cwd=ROOT,
                         env=program_env(tmp_path / "cache"), capture_output=True, text=True, timeout=300)
    assert run.returncode == 2 and run.stdout == "", run.stderr
    assert run.stderr == (f"error: cannot write the index into {out}: No space left on device; "
                          "the previous index is unchanged\n")
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in mount.iterdir()) == ["filler", "index"]  # no temporary folder left
    assert answer_from(KnowledgeBase.load(out, embedder), fake_lm) == ANSWER


def test_a_compile_saved_to_a_full_disk_fails_and_keeps_the_previous_compile(small_disk, fake_lm):
    mount, fill = small_disk
    folder = mount / "compiled"
    save_compiled(CRAG(None), {"lm": "first", "thresholds": {"lower": 0.3, "upper": 0.7}}, folder)
    fill(2 * 1024)
    program = CRAG(None)
    program.generator.generate.demos = [__import__("dspy").Example(question="q" * 5000, context=["c"], answer="a")]
    with pytest.raises(OSError, match="No space left on device"):
        save_compiled(program, {"lm": "second", "thresholds": {"lower": 0.1, "upper": 0.7}}, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["crag.json", "manifest.json"]
    loaded = load_compiled(folder, knowledge_base=ListKnowledgeBase([FOUNDING]), web=None, embedder=None)
    assert loaded.settings.lower == 0.3 and loaded(question=QUESTION).answer == ANSWER


def test_an_index_write_killed_between_its_renames_is_put_back(tmp_path, embedder, fake_lm):
    docs = write_corpus(tmp_path / "docs", 0, seed=8)
    out = tmp_path / "index"
    KnowledgeBase.build(docs, out, embedder)
    dead = 2**22 + 12345  # above the default pid_max: no such process
    out.rename(tmp_path / f".index.old-{dead}-1700000000000000000")  # what a kill after the first rename leaves
    (tmp_path / f".index.tmp-{dead}-x1y2").mkdir()  # and a half-written folder of the dead writer
    kb = KnowledgeBase.load(out, embedder)
    assert answer_from(kb, fake_lm) == ANSWER
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "index"]
