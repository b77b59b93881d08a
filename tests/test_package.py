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
