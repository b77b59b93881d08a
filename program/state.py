"""What was learned about one knowledge base, kept by name: a folder of files, or (beside a
PostgreSQL knowledge base) rows of a table in its database.

Adapted judges, the operating point, the reader demo and the rows the judges were fit on follow
the knowledge base they were learned from (``program.judges.adapted.adapted_state``). Each is one
named blob read and written whole; a write is all or nothing, so a kill mid-write leaves the
previous version. ``stamp()`` changes whenever anything is written, which is how ``serve`` notices
that a knowledge base was adapted again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from program.atomic import write_atomic


class KnowledgeBaseState(Protocol):
    """Named blobs of one knowledge base (and one compile).

    Attributes:
        where: a place for messages: a folder, or ``table NAME_state of DATABASE``.
    """

    where: str

    def read(self, name: str) -> bytes | None:
        """The blob ``name``, or None when it was never written."""

    def write(self, name: str, data: bytes | str) -> None:
        """Write ``name`` all or nothing. Raises ``OSError`` (the previous version stays)."""

    def stamp(self) -> str:
        """Changes whenever a blob is written."""


class FolderState:
    """Blobs as files of one folder, each written atomically (``program.atomic.write_atomic``).

    Args:
        folder: where the files go; created on the first write.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.where = str(self.folder)

    def read(self, name: str) -> bytes | None:
        try:
            return (self.folder / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes | str) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / name, data)

    def stamp(self) -> str:
        try:
            files = sorted((e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in os.scandir(self.folder)
                           if e.is_file() and not e.name.startswith("."))
        except FileNotFoundError:
            return ""
        return repr(files)

    def __repr__(self) -> str:
        return f"FolderState({self.where!r})"




def as_state(where) -> KnowledgeBaseState | None:
    """``where`` as a state: a state as it is, a folder (str or Path) as a :class:`FolderState`,
    None as None."""
    if where is None or hasattr(where, "read"):
        return where
    return FolderState(where)


__all__ = ["FolderState", "KnowledgeBaseState", "as_state"]
