"""The project as a package: a wheel built from the checkout holds the committed compile and the
PopQA data, and its ``crag`` command, installed (not editable) into another environment and run
from another folder, finds them (``.ci/run`` then asks the embedded model the README's question
with ``crag ask`` from an installed wheel)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

import pytest

from tests.service_process import ROOT, program_env, write_docs

pytestmark = pytest.mark.slow  # builds a wheel and a virtual environment

COMPILED = ("confidence.json", "crag.json", "instruction_judge.json", "judges.json", "labeled_pairs.npz",
            "manifest.json", "refinement.json")


SOURCES = ("pyproject.toml", "README.md", "program", "signatures", "optimize", "experiments", "eval_sets", "compiled")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # built from a copy: a build in the checkout would leave its build/ folder there
    source, out = tmp_path_factory.mktemp("source"), tmp_path_factory.mktemp("wheel")
    for name in SOURCES:
        copy = shutil.copytree if (ROOT / name).is_dir() else shutil.copy2
        copy(ROOT / name, source / name, **({"ignore": shutil.ignore_patterns("__pycache__", "adapted", "kb")}
                                             if (ROOT / name).is_dir() else {}))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", str(source), "-w", str(out)],
                   check=True, capture_output=True, text=True, timeout=600)
    return next(out.glob("crag_dspy-*.whl"))


def test_the_wheel_holds_the_compile_the_data_and_the_command(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "crag_dspy-0.1.0.data/data/share/crag-dspy/compiled/"
    assert {data + f for f in COMPILED} <= names
    assert {"eval_sets/popqa/knowledge_base.jsonl", "eval_sets/popqa/web_snapshot.jsonl",
            "program/app/service/page/index.html"} <= names
    # what the installed program runs, and nothing of the compile, the studies or the labeled sets
    assert {n.split("/")[0] for n in names if n.endswith(".py")} == {"program", "signatures", "eval_sets"}
    assert {n.split("/")[1] for n in names if n.startswith("eval_sets/") and n.count("/") > 1} == {"popqa"}
    entry = zipfile.ZipFile(wheel).read("crag_dspy-0.1.0.dist-info/entry_points.txt").decode()
    assert "crag = program.app.cli:main" in entry


def test_crag_installed_from_the_wheel_answers_from_another_folder(wheel, served_fake_lm, tmp_path):
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    target = env_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    # the wheel alone, into the new environment: its code, its data files under its prefix, its command
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(env_dir), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    assert (env_dir / "share" / "crag-dspy" / "compiled" / "crag.json").is_file()
    docs = write_docs(tmp_path / "docs")
    # its dependencies from this environment (a path entry: the checkout's editable install is not read there)
    env = {**program_env(tmp_path / "cache"), "PYTHONPATH": f"{target}:{sysconfig.get_paths()['purelib']}"}
    # the installed command, run by the new environment's interpreter (pip wrote this one's path as its shebang)
    run = subprocess.run([str(env_dir / "bin" / "python"), str(env_dir / "bin" / "crag"), "ask",
                          "Who founded Acme Rockets?", "--kb", str(docs),
                          "--model", "openai/fake", "--api-base", served_fake_lm.base, "--web", "none", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(run.stdout)
    assert result["answer"] == "Acme Rockets was founded by Jane Roe [1]." and result["citations"][0]["page"] == 0
    assert result["citations"][0]["source_id"].startswith("acme.md")
    # the installed compile's trained judges decided, not the uncompiled signatures
    assert result["trace"]["judges"]["judgments"]["passage"] == "trained"
    where = subprocess.run([str(env_dir / "bin" / "python"), "-c", "import program.paths as p; print(p.COMPILED_DIR, "
                            "p.IN_CLONE, p.PROJECT_ROOT)"], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert where.stdout.split() == [str(env_dir / "share" / "crag-dspy" / "compiled"), "False", str(target)]


def _read_only(prefix: Path):
    """Make ``prefix`` read-only for real: a read-only bind mount (root ignores file modes), else
    (not root) its files' write bits off. Returns the function that undoes it."""
    bound = subprocess.run(["mount", "--bind", str(prefix), str(prefix)], capture_output=True).returncode == 0
    if bound and subprocess.run(["mount", "-o", "remount,bind,ro", str(prefix)], capture_output=True).returncode == 0:
        return lambda: subprocess.run(["umount", str(prefix)], check=True)
    if bound:
        subprocess.run(["umount", str(prefix)], check=True)
    subprocess.run(["chmod", "-R", "a-w", str(prefix)], check=True)
    return lambda: subprocess.run(["chmod", "-R", "u+w", str(prefix)], check=True)


def _listing(prefix: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(prefix)): (p.stat().st_size, p.stat().st_mtime_ns) for p in prefix.rglob("*")
            if p.is_file()}


def test_index_ask_and_serve_write_nothing_under_a_read_only_install_prefix(wheel, tmp_path):
    """The bug: ``index`` adapted the judges into ``<prefix>/share/crag-dspy/compiled/adapted/``;
    a system-wide or read-only install had nowhere to put them. Now the per-user state folder
    holds them (here the default, ``~/.cache/crag-dspy``), and the prefix is never written."""
    import httpx

    from signatures import WriteQuestion
    from tests.conftest import default_rules
    from tests.served_fake_lm import start
    from tests.service_process import free_port
    from tests.test_transfer import _first_sentence

    lm = start(rules={**default_rules(), WriteQuestion: _first_sentence}, delay=0.0)
    env_dir = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--prefix", str(env_dir), str(wheel)],
                   check=True, capture_output=True, text=True, timeout=300)
    target = env_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    docs, home = write_docs(tmp_path / "docs"), tmp_path / "home"
    env = {**program_env(tmp_path / "unused"), "HOME": str(home), "DSPY_CACHEDIR": str(home / "dspy"),
           "PYTHONPATH": f"{target}:{sysconfig.get_paths()['purelib']}"}
    for var in ("CRAG_CACHE_DIR", "CRAG_STATE_DIR", "XDG_CACHE_HOME"):
        env.pop(var, None)
    crag = [str(env_dir / "bin" / "python"), str(env_dir / "bin" / "crag")]
    model = ["--model", "openai/fake", "--api-base", lm.base]
    before = _listing(env_dir)
    undo = _read_only(env_dir)
    try:
        index = subprocess.run(crag + ["index", str(docs), "--questions", "0", *model], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=900)
        assert index.returncode == 0, index.stderr[-2000:]
        assert "judges adapted to docs: 2 documents" in index.stdout  # fit and saved: in the state folder
        ask = subprocess.run(crag + ["ask", "Who founded Acme Rockets?", "--kb", str(docs), "--web", "none", *model,
                                     "--json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert ask.returncode == 0, ask.stderr[-2000:]
        assert json.loads(ask.stdout)["trace"]["judges"]["adapted"] is True  # found where index kept them
        port = free_port()
        serve = subprocess.Popen(crag + ["serve", "--port", str(port), "--kb", str(docs), "--web", "none", *model],
                                 cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(600):
                try:
                    answered = httpx.post(f"http://127.0.0.1:{port}/ask", timeout=60,
                                          json={"question": "Who founded Acme Rockets?"})
                    break
                except httpx.HTTPError:
                    time.sleep(0.5)
            assert answered.status_code == 200 and "Jane Roe" in answered.json()["answer"]
        finally:
            serve.terminate()
            serve.wait(30)
    finally:
        undo()
        lm.stop()
    assert _listing(env_dir) == before  # not a file added or changed under the prefix
    state = home / ".cache" / "crag-dspy"
    assert (state / "indexes").is_dir() and list(state.glob("knowledge-bases/*/*/judges.json"))
