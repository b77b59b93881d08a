"""Every ``serve`` and ``index`` flag is checked before anything loads: a bad one is one line naming
the flag and the problem, exit 2, no traceback, nothing served or written (real subprocesses)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.service_process import ROOT, program_env

HOST_FORMS = ("each a host name or address without scheme, port or path: example.com, 10.0.0.5, "
              ".example.com (it and its subdomains), * (any host)")

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop

SERVE = [
    (["--timeout", "-5"], "error: --timeout must be more than 0 and at most 86400, got -5"),
    (["--timeout", "0"], "error: --timeout must be more than 0"),
    (["--timeout", "nan"], "error: --timeout must be more than 0"),
    (["--max-queue", "-1"], "error: --max-queue must be at least 0 and at most 10000, got -1"),
    (["--port", "99999"], "error: --port must be at least 1 and at most 65535, got 99999"),
    (["--port", "0"], "error: --port must be at least 1"),
    (["--port", "http"], "error: argument --port: invalid int value: 'http'"),
    (["--concurrency", "0"], "error: --concurrency must be at least 1 and at most 256, got 0"),
    (["--read-timeout", "-1"], "error: --read-timeout must be more than 0 and at most 3600, got -1"),
    (["-k", "0"], "error: -k must be at least 1 and at most 20, got 0"),
    (["-k", "21"], "error: -k must be at least 1 and at most 20, got 21"),
    (["--host", "no such host"], "error: --host must be an address or host name"),
    (["--api-base", "127.0.0.1:8001/v1"], "error: --api-base must be an http:// or https:// URL with a host"),
    (["--trace-jsonl", "{tmp}"], "error: --trace-jsonl {tmp}: cannot write to it: Is a directory"),
    (["--compiled", "no/such/folder"], "error: --compiled no/such/folder: no compiled program there"),
    (["--web", "altavista"], "error: argument --web: invalid choice: 'altavista'"),
    (["--host", "0.0.0.0"], "error: --host 0.0.0.0: other machines could ask without a key; set CRAG_SERVE_API_KEY"),
    (["--api-key", "short"], "error: --api-key: a key needs at least 16 characters and no spaces"),
    (["--api-key", "a-long-enough-key-1234", "--no-api-key"], "error: --no-api-key: a key is set too; choose one"),
    # --allowed-hosts values that could never match a Host header (they were taken, then every such host got 400)
    (["--allowed-hosts", "y.com:8080"], "error: --allowed-hosts: 'y.com:8080' has a port; give comma-separated "
                                        "hosts, " + HOST_FORMS),
    (["--allowed-hosts", "http://x.com"], "error: --allowed-hosts: 'http://x.com' has a scheme"),
    (["--allowed-hosts", "x.com/api"], "error: --allowed-hosts: 'x.com/api' has a path"),
    (["--allowed-hosts", "[::1]:8000"], "error: --allowed-hosts: '[::1]:8000' has a port"),
    (["--allowed-hosts", "a.com,,b.com"], "error: --allowed-hosts: an empty item"),
    (["--allowed-hosts", ""], "error: --allowed-hosts: an empty item"),
    (["--allowed-hosts", "ex*ample.com"], "error: --allowed-hosts: 'ex*ample.com' is not a host name"),
]
INDEX = [
    (["--time-cap", "0"], "error: --time-cap must be more than 0 and at most 86400, got 0"),
    (["--questions", "-1"], "error: --questions must be at least 0 and at most 10000, got -1"),
    (["--operating-questions", "0"], "error: --operating-questions must be at least 1 and at most 10000, got 0"),
    (["--decline", "1"], "error: --decline must be at least 0 and less than 1, got 1"),
    (["--decline", "nan"], "error: --decline must be at least 0 and less than 1, got nan"),
    (["--out", "{tmp}/docs/a.md"], "error: --out {tmp}/docs/a.md: is a file, not a folder"),
    (["--compiled", "{tmp}"], "error: --compiled {tmp}: no compiled program there"),
    (["--api-base", "ftp://host/v1"], "error: --api-base must be an http:// or https:// URL with a host"),
]


def _run(argv: list[str], tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "program", *argv], cwd=ROOT, env=program_env(tmp_path / "cache"),
                          capture_output=True, text=True, timeout=120)


def _assert_refused(run: subprocess.CompletedProcess, message: str) -> None:
    assert run.returncode == 2 and run.stdout == "", run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), run.stderr


@pytest.mark.parametrize("flags, message", SERVE, ids=[" ".join(f) for f, _ in SERVE])
def test_serve_refuses_a_bad_flag_in_one_line_before_loading(flags, message, tmp_path):
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    run = _run(["serve", "--model", "openai/fake", "--api-base", "http://127.0.0.1:9/v1", "--web", "none", *flags],
               tmp_path)
    _assert_refused(run, message.replace("{tmp}", str(tmp_path)))
    assert not (tmp_path / "cache").exists()  # no index built, nothing loaded


def test_serve_refuses_allowed_hosts_from_the_environment_that_could_never_match(tmp_path):
    env = program_env(tmp_path / "cache", CRAG_ALLOWED_HOSTS="api.example.com, https://x.com")
    run = subprocess.run([sys.executable, "-m", "program", "serve", "--model", "openai/fake", "--api-base",
                          "http://127.0.0.1:9/v1", "--web", "none"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    _assert_refused(run, "error: CRAG_ALLOWED_HOSTS: 'https://x.com' has a scheme; give comma-separated hosts, "
                         + HOST_FORMS)
    assert run.stderr.strip() == run.stderr.strip().splitlines()[0]
    assert not (tmp_path / "cache").exists()


def test_serve_refuses_a_port_in_use_before_loading(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = _run(["serve", "--port", str(port), "--model", "openai/fake", "--api-base", "http://127.0.0.1:9/v1",
                    "--web", "none", "--kb", str(tmp_path)], tmp_path)
    _assert_refused(run, f"error: --port: cannot listen on 127.0.0.1:{port}: Address already in use")


@pytest.mark.parametrize("flags, message", INDEX, ids=[" ".join(f) for f, _ in INDEX])
def test_index_refuses_a_bad_flag_in_one_line_before_indexing(flags, message, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nAcme Rockets was founded by Jane Roe.\n")
    flags = [f.replace("{tmp}", str(tmp_path)) for f in flags]
    run = _run(["index", str(tmp_path / "docs"), *flags,
                *([] if "--out" in flags else ["--out", str(tmp_path / "ix")])],
               tmp_path)
    _assert_refused(run, message.replace("{tmp}", str(tmp_path)))
    assert not (tmp_path / "ix").exists() and not (tmp_path / "cache").exists()


@pytest.mark.parametrize("command", [["serve"], ["ask", "Who founded Acme Rockets?"]])
def test_a_served_model_without_its_key_stops_before_loading(command, tmp_path):
    env = program_env(tmp_path / "cache")
    for var in ("CRAG_API_KEY", "OPENAI_API_KEY"):
        env.pop(var, None)
    run = subprocess.run([sys.executable, "-m", "program", *command, "--model", "openai/gpt-4o-mini", "--web", "none"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    _assert_refused(run, "error: --model openai/gpt-4o-mini needs a key: set OPENAI_API_KEY (or CRAG_API_KEY)")
    assert not (tmp_path / "cache").exists()
