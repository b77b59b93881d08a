"""``ask``'s filters as a user types them: the citations come from the kept documents only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service_process import program_env

pytestmark = pytest.mark.slow  # runs the command in a subprocess, indexing real documents

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "documents"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The help centre's Markdown files and a two-page PDF as its publisher released it."""
    root = tmp_path_factory.mktemp("cli-filters")
    shutil.copytree(ROOT / "eval_sets" / "adversarial" / "kb", root / "kb")
    shutil.copy(DATA / "multicolumn.pdf", root / "kb" / "multicolumn.pdf")
    return root


def _ask(corpus, citing_lm, question: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "program", "ask", question, "--kb", str(corpus / "kb"), "--model",
                           "openai/fake", "--api-base", citing_lm.base, "--compiled", "none", "--web", "none",
                           "--no-cache", *flags], cwd=ROOT, env=program_env(corpus / "cache"), capture_output=True,
                          text=True, timeout=600)


def _cited(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[")]


def test_ask_with_a_path_cites_only_that_file(corpus, citing_lm):
    run = _ask(corpus, citing_lm, "How do I rotate an API key?", "--path", "refunds.md")
    assert run.returncode == 0, run.stderr
    assert _cited(run.stdout) and all("refunds.md" in line for line in _cited(run.stdout))
    assert "filter: path refunds.md (the citations come from these documents only)" in run.stdout.splitlines()


def test_ask_with_a_type_and_pages_cites_those_pages(corpus, citing_lm):
    run = _ask(corpus, citing_lm, "What does the text in two columns say?", "--type", "pdf", "--pages", "2", "--json")
    assert run.returncode == 0, run.stderr
    import json

    result = json.loads(run.stdout)
    assert result["filter"] == {"types": ["pdf"], "pages": "2-2"}
    assert result["citations"] and {(c["source_id"].split("#")[0], c["page"]) for c in result["citations"]} == {
        ("multicolumn.pdf", 2)}


def test_ask_with_a_filter_that_keeps_nothing_says_so(corpus, citing_lm):
    run = _ask(corpus, citing_lm, "How do I rotate an API key?", "--type", "docx")
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines()[0] == "No documents match the filter: type docx."
    assert "outcome: no-documents" in run.stdout


@pytest.mark.parametrize("flags, message", [
    (["--path", "../other/*"], "error: paths: '../other/*' leaves the knowledge base's folder ('..')"),
    (["--pages", "9-2"], "error: pages: 9-2 is not a range of pages (1 <= first <= last)"),
    (["--modified-since", "yesterday"], "error: modified_since: expected a date as YYYY-MM-DD, got 'yesterday'")])
def test_a_bad_filter_flag_is_one_line(corpus, citing_lm, flags, message):
    run = _ask(corpus, citing_lm, "How do I rotate an API key?", *flags)
    assert run.returncode == 2 and run.stderr.strip().splitlines() == [message] and run.stdout == ""
