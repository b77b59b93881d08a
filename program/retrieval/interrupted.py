"""Recovery after a writer of a saved index was killed: the previous index put back, and the
temporary folders of writers that are no longer running removed.

The writer (``program.retrieval.index._write_atomic``) fills ``.NAME.tmp-PID-RANDOM`` beside the
index folder ``NAME``, renames ``NAME`` to ``.NAME.old-PID-NANOSECONDS``, renames the temporary
folder to ``NAME`` and removes the old one. Only a kill between the two renames leaves no ``NAME``.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

log = logging.getLogger(__name__)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_interrupted_write(index_dir: Path, manifest_name: str = "manifest.json") -> None:
    """Undo what a killed writer left beside ``index_dir`` (see the module docstring).

    With no ``index_dir``, the newest ``.NAME.old-*`` holding ``manifest_name`` is renamed back,
    unless its writer is still running (it is between its two renames: ``serve`` polling for a new
    build must not undo an ``index`` under way); then the temporary folders and old copies of
    writers that are no longer running are removed.
    Never raises (a read-only parent folder is left as it is, with a warning in the log).
    """
    index_dir = Path(index_dir)
    parent = index_dir.parent
    if not parent.is_dir():
        return
    prefix = f".{index_dir.name}."
    try:
        # name after the prefix: "tmp-PID-RANDOM" or "old-PID-NANOSECONDS"
        leftovers = {p: p.name[len(prefix):].split("-") for p in parent.iterdir() if p.name.startswith(prefix)}
        olds = sorted((p for p, parts in leftovers.items() if parts[0] == "old" and parts[-1].isdigit()),
                      key=lambda p: int(leftovers[p][-1]))
        # a writer still running is between its two renames: its new index is on the way, not lost
        # (a reader that put the old one back would make that writer drop its build)
        if not index_dir.exists() and olds and (olds[-1] / manifest_name).is_file() and not (
                leftovers[olds[-1]][1].isdigit() and _pid_alive(int(leftovers[olds[-1]][1]))):
            log.warning("index %s: restoring the previous index left by an interrupted write", index_dir)
            os.replace(olds.pop(), index_dir)
        for p, parts in leftovers.items():
            if p.exists() and len(parts) >= 3 and parts[1].isdigit() and not _pid_alive(int(parts[1])):
                shutil.rmtree(p, ignore_errors=True)
    except OSError as exc:
        log.warning("index %s: cannot clean up after an interrupted write: %s", index_dir, exc)
