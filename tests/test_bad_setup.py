"""A setup the program cannot start with, and one it must: real ``ask``, ``serve`` and ``index``
processes. A model that does not exist, an empty knowledge-base path, a trace file in a folder that
does not exist are one line naming the flag or variable, exit 2, nothing made; a local
OpenAI-compatible server without a key answers; a folder symlink leading outside the knowledge base
is named like a file symlink."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.service_process import ROOT, ServiceProcess, program_env, write_docs

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

QUESTION = "Who founded Acme Rockets?"
ANSWER = "Acme Rockets was founded by Jane Roe [1]."
FORMS = ("embedded-1.5b, embedded-0.5b, or a DSPy model string provider/name (openai/NAME, hosted_vllm/NAME, "
         "ollama_chat/NAME...)")
SERVED = ["--model", "openai/fake", "--api-base", "http://127.0.0.1:9/v1", "--web", "none"]
COMMANDS = {"ask": ["ask", QUESTION, *SERVED], "serve": ["serve", *SERVED], "index": ["index", "{tmp}/docs", "--out",
                                                                                      "{tmp}/ix", "--no-adapt"]}


def _keyless_env(tmp_path, **extra) -> dict:
    """``program_env`` without any LM key (nor a knowledge base or link policy), then ``extra``."""
    env = program_env(tmp_path / "cache")
    for var in ("CRAG_API_KEY", "OPENAI_API_KEY", "CRAG_KB", "CRAG_OUTSIDE_LINKS"):
        env.pop(var, None)
    return {**env, **extra}


def _run(argv: list[str], tmp_path, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    return subprocess.run([sys.executable, "-m", "program", *argv], cwd=ROOT,
                          env=env if env is not None else _keyless_env(tmp_path), capture_output=True, text=True,
                          timeout=300)


def _assert_refused(run: subprocess.CompletedProcess, message: str) -> None:
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    assert lines == [message], run.stderr


# 1. a local OpenAI-compatible server (vLLM, llama.cpp, LM Studio) takes no key


@pytest.mark.parametrize("base_from", ["--api-base", "CRAG_API_BASE"])
def test_ask_answers_from_a_local_openai_server_without_any_key(base_from, served_fake_lm, tmp_path):
    docs = write_docs(tmp_path / "docs")
    flags = ["--api-base", served_fake_lm.base] if base_from == "--api-base" else []
    env = _keyless_env(tmp_path, **({"CRAG_API_BASE": served_fake_lm.base} if base_from == "CRAG_API_BASE" else {}))
    run = _run(["ask", QUESTION, "--model", "openai/fake", *flags, "--kb", str(docs), "--compiled", "none",
                "--web", "none", "--no-cache"], tmp_path, env)
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    assert run.stdout.splitlines()[0] == ANSWER


def test_serve_answers_from_a_local_openai_server_without_any_key(served_fake_lm, tmp_path):
    docs = write_docs(tmp_path / "docs")
    process = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                              "--compiled", "none", "--web", "none", "--no-cache"], _keyless_env(tmp_path),
                             tmp_path / "serve.log")
    try:
        response = httpx.post(f"{process.base}/ask", json={"question": QUESTION}, timeout=120)
    finally:
        process.stop()
    assert response.status_code == 200, response.text
    assert response.json()["answer"] == ANSWER


def test_ask_says_an_lm_failure_in_one_line_never_a_traceback(served_fake_lm, tmp_path):
    """A provider whose key is not set, at a base URL (so not refused at start): its first call fails."""
    docs = write_docs(tmp_path / "docs")
    run = _run(["ask", QUESTION, "--model", "anthropic/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                "--compiled", "none", "--web", "none", "--no-cache"], tmp_path)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and run.stdout == "" and "Traceback" not in run.stderr, run.stderr
    assert lines[-1].startswith(f"error: the language model at {served_fake_lm.base} failed: LMNotConfiguredError: "
                                "[anthropic/fake] no API key found for provider 'anthropic'"), run.stderr
    assert all(line.startswith("note: ") for line in lines[:-1]), run.stderr


# 2. an empty knowledge-base path

EMPTY_KB = "error: --kb is empty; give a corpus file or folder or a postgresql:// URL, or leave --kb out"
EMPTY_CRAG_KB = ("error: CRAG_KB is set but empty; set it to a corpus file or folder or a postgresql:// URL, "
                 "or unset it")
KB_CASES = {
    "ask --kb ''": (["ask", QUESTION, *SERVED, "--kb", ""], {}, EMPTY_KB),
    "serve --kb ''": (["serve", *SERVED, "--kb", ""], {}, EMPTY_KB),
    "serve --kb a=": (["serve", *SERVED, "--kb", "a="], {},
                      "error: --kb a=: the path after '=' is empty; give NAME=PATH, PATH a corpus file or folder "
                      "or a postgresql:// URL"),
    "serve --kb docs --kb b=": (["serve", *SERVED, "--kb", "{tmp}/docs", "--kb", "b="], {},
                                "error: --kb b=: the path after '=' is empty; give NAME=PATH, PATH a corpus file or "
                                "folder or a postgresql:// URL"),
    "ask CRAG_KB=": (["ask", QUESTION, *SERVED], {"CRAG_KB": ""}, EMPTY_CRAG_KB),
    "serve CRAG_KB=": (["serve", *SERVED], {"CRAG_KB": ""}, EMPTY_CRAG_KB),
    "index --kb ''": (COMMANDS["index"] + ["--kb", ""], {}, EMPTY_KB),
    "index CRAG_KB=": (COMMANDS["index"], {"CRAG_KB": ""}, EMPTY_CRAG_KB),
}


@pytest.mark.parametrize("case", sorted(KB_CASES))
def test_an_empty_knowledge_base_path_is_refused_not_replaced_by_popqa(case, tmp_path):
    argv, env, message = KB_CASES[case]
    write_docs(tmp_path / "docs")
    _assert_refused(_run(argv, tmp_path, _keyless_env(tmp_path, **env)), message)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "ix").exists()  # nothing indexed


# 3. a model that does not exist

MODEL_CASES = {
    "embedded-7b": (["--model", "embedded-7b"], {},
                    "error: --model embedded-7b: no such embedded model; the embedded models are embedded-1.5b, "
                    "embedded-0.5b"),
    "empty": (["--model", ""], {}, f"error: --model is empty; a model is {FORMS}"),
    "no provider": (["--model", "gpt4"], {}, f"error: --model gpt4: names no provider; a model is {FORMS}"),
    "CRAG_LM=embedded-7b": ([], {"CRAG_LM": "embedded-7b"},
                            "error: CRAG_LM embedded-7b: no such embedded model; the embedded models are "
                            "embedded-1.5b, embedded-0.5b"),
    "CRAG_LM=": ([], {"CRAG_LM": ""}, f"error: CRAG_LM is set but empty; a model is {FORMS}"),
    "CRAG_LM=gpt 4": ([], {"CRAG_LM": "gpt 4"}, f"error: CRAG_LM 'gpt 4': names no provider; a model is {FORMS}"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(MODEL_CASES))
def test_a_model_that_does_not_exist_is_refused_at_start(case, command, tmp_path):
    flags, env, message = MODEL_CASES[case]
    argv = COMMANDS[command]
    argv = [a for i, a in enumerate(argv) if "--model" not in (a, argv[i - 1])]  # only the case's model
    write_docs(tmp_path / "docs")
    run = _run([*argv, *flags], tmp_path, {**_keyless_env(tmp_path), **env})
    _assert_refused(run, message)
    assert not (tmp_path / "cache").exists() and not (tmp_path / "ix").exists()


# 4. a trace file in a folder that does not exist


@pytest.mark.parametrize("command", ["ask", "serve"])
def test_a_trace_file_in_a_missing_folder_is_refused_and_no_folder_is_made(command, tmp_path):
    trace = tmp_path / "no" / "such" / "x.jsonl"
    run = _run([*COMMANDS[command], "--trace-jsonl", str(trace)], tmp_path)
    _assert_refused(run, f"error: --trace-jsonl {trace}: the folder {trace.parent} does not exist; give a file in "
                         "an existing folder")
    assert not (tmp_path / "no").exists() and not (tmp_path / "cache").exists()


# 5. a symlink to a folder outside the knowledge base


@pytest.fixture
def linked_folder(tmp_path):
    """The two documents, a link to a folder outside (holding a loop back to itself) and one to a
    folder inside (whose file is read once, where it is)."""
    docs = write_docs(tmp_path / "docs")
    (docs / "sub").mkdir()
    (docs / "sub" / "inner.md").write_text("# Inner\n\nThe inner document is read once.\n")
    (docs / "alias").symlink_to(docs / "sub")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nThe vault code is 1234.\n")
    (outside / "again").symlink_to(outside)  # a loop: walked once, never for ever
    (docs / "shared").symlink_to(outside)
    return docs, outside


def test_a_folder_linking_outside_is_left_out_with_a_note(linked_folder, tmp_path):
    docs, outside = linked_folder
    run = _run(["index", str(docs), "--out", str(tmp_path / "ix"), "--no-adapt"], tmp_path)
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: left out shared: links outside the knowledge base (to the folder {outside}); "
                     "CRAG_OUTSIDE_LINKS=follow reads it",
                     f"note: 1 file(s) left out of {docs}; the rest was read"]
    assert run.stdout.splitlines()[0].startswith(f"indexed 3 chunks from {docs} into {tmp_path / 'ix'}: new index")


def test_a_folder_linking_outside_is_read_and_named_when_the_operator_follows_links(linked_folder, tmp_path):
    docs, outside = linked_folder
    run = _run(["index", str(docs), "--out", str(tmp_path / "ix"), "--no-adapt"], tmp_path,
               _keyless_env(tmp_path, CRAG_OUTSIDE_LINKS="follow"))
    assert run.returncode == 0, run.stderr
    notes = [line for line in run.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: shared -> {outside} links outside the knowledge base and is read "
                     "(CRAG_OUTSIDE_LINKS=follow)"]
    assert run.stdout.splitlines()[0].startswith(f"indexed 4 chunks from {docs} into {tmp_path / 'ix'}: new index")
