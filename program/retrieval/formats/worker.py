"""Conversion in a child process with a time limit: a file whose converter runs past it is stopped,
named in one line and left out, and the next file is converted.

pdfplumber, mammoth and markitdown are in-process Python that no thread can interrupt, and SIGALRM
works in the main thread only (the knowledge base may be reloaded from a thread of the service).
So :class:`ConvertWorker` converts in one long-lived child, one file after another, and kills the
child when a file takes longer than :func:`convert_timeout` (600 s, ``CRAG_CONVERT_TIMEOUT``; R's
2,415-page reference manual, the slowest real file we know, takes about 2 minutes); the next file
starts a new child. A child that dies (killed for lack of memory) leaves its file out the same
way. A PDF's page progress comes back over the same pipe as the result.

The child is a fresh interpreter running :func:`child_main`: a fork would copy the parent's torch
and threads in whatever state they are, and multiprocessing's spawn would run the parent's
``__main__`` script again in the child (a script that loads a corpus at its top level would load
it there too). The clock of a file starts once the child has imported its converter. The child
reads zip members in bounded steps (``archive.bound_zip_reads``) and ends when the parent's pipe
closes or the parent dies.
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import threading
import time
from multiprocessing import Pipe
from multiprocessing.connection import Connection
from pathlib import Path

from program.retrieval.errors import CorpusError
from program.retrieval.formats import check, convert
from program.retrieval.formats.archive import bound_zip_reads
from program.retrieval.formats.base import Converted, DocumentError

DEFAULT_CONVERT_TIMEOUT = 600.0
STARTUP_SECONDS = 120  # for the child to start and import a converter, off the clock of the file
# what each file type's converter imports, before its clock starts
_MARKITDOWN = ["program.retrieval.formats.office", "markitdown.converters"]
_IMPORTS = {".pdf": ["program.retrieval.formats.pdf", "pdfplumber"],
            ".docx": ["program.retrieval.formats.office", "program.retrieval.formats.html", "mammoth"],
            ".pptx": _MARKITDOWN, ".xlsx": _MARKITDOWN, ".csv": _MARKITDOWN}
_ROOT = Path(__file__).resolve().parents[3]  # the folder holding the package ``program``


def convert_timeout() -> float:
    """Seconds one file's conversion may take: ``$CRAG_CONVERT_TIMEOUT``, else 600.

    Raises:
        CorpusError: the variable is set but not a number above 0.
    """
    raw = os.environ.get("CRAG_CONVERT_TIMEOUT", "").strip()
    if not raw:
        return DEFAULT_CONVERT_TIMEOUT
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise CorpusError(f"CRAG_CONVERT_TIMEOUT must be a number of seconds above 0, got {raw!r}")
    return seconds


class ConvertWorker:
    """Converts PDF and Office files one after another in a child process, each within
    :func:`convert_timeout` seconds.

    A context manager: the child starts at the first file and ends on exit. For one thread at a
    time (the corpus loader makes one per load).
    """

    def __init__(self):
        self._child: subprocess.Popen | None = None
        self._pipe: Connection | None = None

    def __enter__(self) -> "ConvertWorker":
        return self

    def __exit__(self, kind, *_) -> None:
        if kind is not None and self._child is not None:
            self._kill()  # an error or Ctrl-C here: the file being converted is not waited for
        self.close()

    def convert(self, path: Path, progress=None) -> Converted:
        """``path`` as Markdown, as ``formats.convert`` gives it; ``progress(pages_done, pages_total)``
        is called here as the child reads a PDF's pages.

        Raises:
            DocumentError: what ``formats.convert`` raises; the conversion took longer than
                :func:`convert_timeout`; the child died or the converter failed unexpectedly.
            CorpusError: a size or time variable is set but not a number.
        """
        check(path)  # the caps first, in this process: a zip bomb never reaches a child
        limit = convert_timeout()
        pipe = self._start()
        # the converter goes with the request, by name: the child imports it (a test's own converter too)
        pipe.send((convert, str(path)))
        # the clock starts once the child has imported the file type's converter (markitdown: 1.1 s)
        if self._receive(path, time.monotonic() + STARTUP_SECONDS) is None:
            raise DocumentError(f"{path}: the conversion process did not start in {STARTUP_SECONDS} s; left out")
        deadline = time.monotonic() + limit
        while (message := self._receive(path, deadline)) is not None:
            kind, value = message
            if kind == "pages":
                if progress is not None:
                    progress(*value)
            elif kind == "done":
                return value
            else:
                raise (CorpusError if kind == "setting" else DocumentError)(value)
        raise DocumentError(f"{path}: conversion took longer than {limit:g} s; left out "
                            "(raise CRAG_CONVERT_TIMEOUT if it is meant)")

    def _receive(self, path: Path, deadline: float) -> tuple | None:
        """The child's next message, or None (the child killed) when none has come by ``deadline``.

        Raises:
            DocumentError: the child died (its pipe closed).
        """
        left = deadline - time.monotonic()
        if left <= 0 or not self._pipe.poll(left):
            self._kill()
            return None
        try:
            return self._pipe.recv()
        except (EOFError, OSError):
            raise DocumentError(f"{path}: the conversion stopped ({self._kill()}); left out") from None

    def close(self) -> None:
        """End the child, if one runs: its pipe closed, it exits (killed if it has not in 5 s)."""
        if self._child is None:
            return
        self._pipe.close()
        try:
            self._child.wait(5)
        except subprocess.TimeoutExpired:
            self._kill()
        self._child = self._pipe = None

    def _start(self) -> Connection:
        if self._child is not None:
            return self._pipe
        ours, theirs = Pipe()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_ROOT), os.environ.get("PYTHONPATH")]))}
        # -c, not -m: corpus imports this module, which runpy would then warn of on stderr
        main = f"from {__name__} import child_main; child_main({theirs.fileno()}, {os.getpid()})"
        self._child = subprocess.Popen([sys.executable, "-c", main], pass_fds=[theirs.fileno()],
                                       stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self._pipe = ours
        return ours

    def _kill(self) -> str:
        """Kill the child; how it ended, e.g. ``"killed by signal 9"``."""
        child, self._child = self._child, None
        self._pipe.close()
        self._pipe = None
        child.kill()
        code = child.wait()
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def _serve(pipe: Connection) -> None:
    """The child: for each ``(converter, path)`` request, import the file type's converter and answer
    ``("started", None)``, then ``("pages", (done, total))`` as a PDF is read, then ``("done", Converted)``
    or ``(kind, message)`` for an error; end at EOF."""
    bound_zip_reads()
    while True:
        try:
            target, name = pipe.recv()
        except EOFError:
            return
        path = Path(name)
        for module in _IMPORTS.get(path.suffix.lower(), []):
            try:
                importlib.import_module(module)
            except ImportError:
                pass  # the converter names the missing extra itself
        pipe.send(("started", None))
        try:
            answer = ("done", target(path, lambda done, total: pipe.send(("pages", (done, total)))))
        except DocumentError as exc:
            answer = ("document", str(exc))
        except CorpusError as exc:  # a setting, not the file: the whole load stops, as in one process
            answer = ("setting", str(exc))
        except Exception as exc:  # a converter's own bug on this file: the file is left out
            reason = (str(exc).strip().splitlines() or [""])[0][:160]
            answer = ("document", f"{path}: conversion failed ({type(exc).__name__}: {reason})")
        pipe.send(answer)


def _exit_with_parent(parent: int) -> None:
    # a parent killed outright (SIGKILL) closes no pipe a busy child would notice: it polls instead
    while os.getppid() == parent:
        time.sleep(1)
    os._exit(1)


def child_main(fd: int, parent: int) -> None:
    """The child's entry: serve the pipe ``fd`` to the process ``parent``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends this child
    os.dup2(2, 1)  # a converter's print goes to stderr, never into the parent's output (`ask --json`)
    threading.Thread(target=_exit_with_parent, args=(parent,), daemon=True).start()
    _serve(Connection(fd))
