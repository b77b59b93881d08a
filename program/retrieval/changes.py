"""What changed in a corpus since its last build: the files added, changed and removed, or why
everything must be built again.

``index`` hashes every corpus file (sha256) and compares the hashes with the last build's
manifest, as LlamaIndex's ``IngestionPipeline`` compares its docstore: an unchanged file keeps its
chunks and vectors; an added or changed one is read, converted and embedded; a removed one's
chunks are dropped. Some differences change every chunk, and then everything is built again, said
in one line (:attr:`CorpusChanges.rebuild`): another embedder, other chunking parameters (the
sentence splitter's version among them), another index format, a corpus at another path, or a
previous index that does not record its chunks per file.
"""

from __future__ import annotations

from dataclasses import dataclass

FILE_CHUNKS = "file_chunks"  # manifest entry: corpus file -> its chunk count, in chunk order
FILE_MODIFIED = "file_modified"  # manifest entry: corpus file -> its modification time when indexed (UTC)
UNREADABLE_FILES = "unreadable_files"  # manifest entry: corpus file -> the line saying why it was left out
NEW = "no previous index"
MISSING_CONVERTER = "crag-dspy[documents]"  # in the line of a file left out for want of its converter


@dataclass(frozen=True)
class CorpusChanges:
    """The difference between the last build and the corpus now.

    Attributes:
        added, changed, removed, unchanged: corpus files (relative names, as the manifest's
            ``files`` keys), each sorted.
        retried: unchanged files the last build could not read for want of a converter (the
            documents extra): read again, since it may be installed now. An unchanged file that
            could not be read for itself (encrypted, corrupt, over a cap) stays left out.
        kept_chunks: chunks of the unchanged files, kept with their vectors.
        rebuild: why every file is read and embedded again (one line), or None.
    """

    added: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()
    retried: tuple[str, ...] = ()
    kept_chunks: int = 0
    rebuild: str | None = None

    @property
    def none(self) -> bool:
        """True when nothing is to be done: no file added, changed, removed or retried."""
        return self.rebuild is None and not (self.added or self.changed or self.removed or self.retried)

    @property
    def to_read(self) -> tuple[str, ...]:
        """The files read, converted and embedded: added, changed and retried (all, on a rebuild)."""
        return tuple(sorted(self.added + self.changed + self.retried))

    def line(self) -> str:
        """``2 added, 1 changed, 1 removed; 315 chunks kept``, ``nothing changed; 318 chunks kept``
        or ``rebuilt: the chunking changed (target_tokens 200 -> 150)``."""
        if self.rebuild == NEW:
            return f"new index: {len(self.added)} file(s) read"
        if self.rebuild is not None:
            return f"rebuilt: {self.rebuild}"
        parts = [f"{len(names)} {what}" for names, what in ((self.added, "added"), (self.changed, "changed"),
                                                            (self.removed, "removed")) if names]
        if self.retried:
            parts.append(f"{len(self.retried)} unreadable read again")
        kept = f"{self.kept_chunks} chunk{'' if self.kept_chunks == 1 else 's'} kept"
        return f"{', '.join(parts) or 'nothing changed'}; {kept}"

    def to_dict(self) -> dict:
        """The manifest's ``changes`` entry: the lists, the count kept and the rebuild reason."""
        return {"added": list(self.added), "changed": list(self.changed), "removed": list(self.removed),
                "retried": list(self.retried), "kept_chunks": self.kept_chunks, "rebuild": self.rebuild}


def _differs(name: str, before, now) -> str:
    """``the chunking changed (target_tokens 200 -> 150)``: the keys of two dicts that differ."""
    if isinstance(before, dict) and isinstance(now, dict):
        keys = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
        said = ", ".join(f"{k} {before.get(k)!r} -> {now.get(k)!r}" for k in keys[:3])
        return f"the {name} changed ({said})"
    return f"the {name} changed ({before!r} -> {now!r})"


def compare(saved: dict | None, expected: dict, source_path: str) -> CorpusChanges:
    """The changes from the manifest ``saved`` of the last build to ``expected`` (this build's
    ``format_version``, ``chunking``, ``embedding`` and ``files``: name -> sha256) of the corpus at
    ``source_path``.

    Returns a :class:`CorpusChanges` whose ``rebuild`` says why every file is read again when
    ``saved`` is None or cannot be built on (see the module docstring)."""
    files = expected["files"]
    if saved is None:
        return CorpusChanges(added=tuple(sorted(files)), rebuild=NEW)
    for key, name in (("format_version", "index format"), ("embedding", "embedder"), ("chunking", "chunking")):
        if saved.get(key) != expected[key]:
            return CorpusChanges(added=tuple(sorted(files)), rebuild=_differs(name, saved.get(key), expected[key]))
    if saved.get("source_path") != source_path:
        return CorpusChanges(added=tuple(sorted(files)),
                             rebuild=f"the corpus is at another path ({saved.get('source_path')} -> {source_path})")
    per_file = saved.get(FILE_CHUNKS)
    if not isinstance(per_file, dict) or sum(per_file.values()) != saved.get("chunk_count"):
        return CorpusChanges(added=tuple(sorted(files)),
                             rebuild="the previous index does not record its chunks per file")
    before = saved.get("files") or {}
    added = sorted(f for f in files if f not in before)
    removed = sorted(f for f in before if f not in files)
    changed = sorted(f for f in files if f in before and before[f] != files[f])
    same = [f for f in files if f in before and before[f] == files[f]]
    unreadable = saved.get(UNREADABLE_FILES) or {}
    retried = sorted(f for f in same
                     if f not in per_file and (f not in unreadable or MISSING_CONVERTER in unreadable[f]))
    unchanged = sorted(f for f in same if f not in retried)
    return CorpusChanges(tuple(added), tuple(changed), tuple(removed), tuple(unchanged), tuple(retried),
                         sum(per_file.get(f, 0) for f in unchanged))


__all__ = ["FILE_CHUNKS", "FILE_MODIFIED", "UNREADABLE_FILES", "CorpusChanges", "compare"]
