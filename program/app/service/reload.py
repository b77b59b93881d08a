"""``serve`` follows its knowledge bases: a new build, or judges adapted again, is loaded beside the
program in use and switched to between requests.

Every ``interval`` seconds a thread asks each served knowledge base for the build saved now
(``saved_build``: a faiss index's manifest time, a PostgreSQL knowledge base's generation) and
for the stamp of what is learned about it (``program.judges.adapted.adapted_state``: adapted
judges, operating point, reader demo). When either moved, it opens the new build (a faiss index is
loaded from its folder, never rebuilt here; a PostgreSQL one already searches its live rows),
builds the program over it as at start, and swaps the runner's program. A request takes the
program once, when it starts (``QuestionRunner.view``), so requests in flight finish on the old
one, which is dropped when the last of them ends. A load that fails keeps the old program serving
and logs one line (once per failing build).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path

from program.app.compiled import COMPILED_DIR
from program.app.startup import program_for
from program.judges.adapted import adapted_state

log = logging.getLogger("program.service")

DEFAULT_INTERVAL = 2.0


def _compiled(flags) -> Path | None:
    """The compile the flags load (None: the uncompiled signatures, nothing adapted)."""
    if flags.compiled == "none":
        return None
    return Path(flags.compiled) if flags.compiled else COMPILED_DIR


def signature(kb, flags) -> tuple[str | None, str]:
    """``(the build saved now, the stamp of what is learned about it)`` of ``kb``."""
    compiled = _compiled(flags)
    state = adapted_state(compiled, kb) if compiled is not None else None
    return kb.saved_build(), state.stamp() if state is not None else ""


@dataclass
class Watched:
    """One served knowledge base: its runner, the flags it was loaded with, the signature loaded.

    Attributes:
        name: as the operator named it (``/v1/models``).
        runner: its ``QuestionRunner``; ``runner.program`` is swapped on a reload.
        flags, config: what ``program_for`` builds its program from.
        describe: ``(program) -> dict``: what ``/healthz`` says of a loaded program.
        infos: ``/healthz``'s dict, name -> that description (updated on a reload).
        loaded: the signature of the program serving now.
        failed: the signature whose load failed last (not tried again until it moves).
        reloads: how many times a new build was switched to.
    """

    name: str
    runner: object
    flags: object
    config: object
    describe: object
    infos: dict
    loaded: tuple = ()
    failed: tuple | None = None
    reloads: int = 0


def _reopen(kb):
    """The knowledge base's new build: a faiss index loaded from its folder (same embedder); a
    PostgreSQL knowledge base as it is (its search reads the live rows)."""
    if hasattr(kb, "index_dir"):
        return type(kb).load(kb.index_dir, embedder=kb.embedder)
    return kb


def reload_if_new(watched: Watched) -> bool:
    """Load ``watched``'s knowledge base again when its build or state moved; True when it was
    switched to a new program. A failure is logged in one line; the old program keeps serving."""
    old = watched.runner.program
    now = signature(old.knowledge_base, watched.flags)
    if now == watched.loaded or now == watched.failed or now[0] is None:
        return False
    try:
        kb = _reopen(old.knowledge_base)
        program = program_for(watched.flags, watched.config, kb, decide_retrieval=True, quiet=True)
        kb.search("warm up", 1)
        info = watched.describe(program)
    except Exception as exc:  # whatever the new build lacks, the old one serves on
        watched.failed = now
        log.warning("knowledge base %s: cannot load its new build (%s); still answering from the one loaded at "
                    "start or last reload", watched.name, " ".join(str(exc).split())[:300] or type(exc).__name__)
        return False
    watched.runner.program = program  # between requests: each request took its program when it began
    info["knowledge_base"]["reloads"] = watched.reloads + 1
    watched.infos[watched.name] = info
    watched.loaded, watched.failed, watched.reloads = now, None, watched.reloads + 1
    log.info("knowledge base %s: switched to its new build (%s, %d chunks)", watched.name, now[0], len(kb))
    return True


@dataclass
class Reloader:
    """A daemon thread calling :func:`reload_if_new` for each of ``watched`` every ``interval``
    seconds (0: never). ``start()`` it before serving, ``stop()`` after."""

    watched: list[Watched]
    interval: float = DEFAULT_INTERVAL
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> "Reloader":
        for w in self.watched:
            w.loaded = signature(w.runner.program.knowledge_base, w.flags)
        if self.interval > 0:
            self._thread = threading.Thread(target=self._run, name="knowledge-base reloader", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            for w in self.watched:
                try:
                    reload_if_new(w)
                except Exception as exc:  # e.g. the database away: ask again next time
                    log.warning("knowledge base %s: cannot check for a new build: %s", w.name, exc)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


__all__ = ["DEFAULT_INTERVAL", "Reloader", "Watched", "reload_if_new", "signature"]
