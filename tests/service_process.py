"""``python -m program serve`` as a real process on a loopback port, answering with the served fake LM."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
DOCS = {
    "acme.md": "# Acme Rockets\n\nAcme Rockets was founded by Jane Roe in 1999. "
               "The company builds small sounding rockets.\n",
    "danube.md": "# Danube\n\nThe Danube flows through ten countries. It is Europe's second-longest river.\n",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def write_docs(folder: Path) -> Path:
    """The small knowledge base: two documents, one naming Acme Rockets' founder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


def program_env(cache: Path, **extra) -> dict:
    # DSPY_CACHEDIR too: importing program.lm.configure set it in this process to the project's LM cache, where a
    # subprocess would find answers cached by another test (the cache key ignores the api_base)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "CRAG_CACHE_DIR": str(cache), "DSPY_CACHEDIR": str(cache / "dspy"),
           "CRAG_API_KEY": "test-key", **extra}
    for var in ("CRAG_LM", "CRAG_API_BASE", "CRAG_WEB", "CRAG_DECIDE_RETRIEVAL", "CRAG_STATE_DIR"):
        env.pop(var, None)
    return env


class ServiceProcess:
    """Start ``python -m program serve ARGS`` and wait for ``/healthz``; ``base`` is its URL."""

    def __init__(self, args: list[str], env: dict, log: Path, startup: float = 180.0):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        self.process = subprocess.Popen([sys.executable, "-m", "program", "serve", "--port", str(self.port), *args],
                                        cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + startup
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited with {self.process.returncode}: {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"serve did not start in {startup:g} s: {log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def read_events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The ``(event, data)`` pairs of a server-sent event stream, in order."""
    import json

    events, name, data = [], "message", ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data += line[5:].strip()
        elif not line and data:
            events.append((name, json.loads(data)))
            name, data = "message", ""
    return events
