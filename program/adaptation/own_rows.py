"""The rows a knowledge base gave of itself, kept with it, so that after a small change the judges
are refit in seconds instead of adapted again from scratch.

ARES (Saad-Falcon et al. 2024, §3) adapts its judges from questions written for a domain's own
passages; here those rows (``program.adaptation.synthetic_rows.document_source``) are saved in the
knowledge base's state (``own_rows.npz``, the format of ``labeled_pairs.npz``) with, per row
group, the corpus file it came from and the files' hashes when they were made. The next adaptation
(:func:`own_rows`):

* keeps the rows of files that did not change, drops those of changed and removed files, and asks
  only the added and changed files for rows, when at most ``REFIT_SHARE`` of the chunks changed;
* makes every row again past that share (the questions of unchanged files were kept when
  retrieval ranked their source first among the old documents: with a quarter of them new, that
  test and the negatives drawn from other documents no longer hold), or when the rows were made
  by other options or code.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from dataclasses import dataclass, replace

from program.adaptation.fit import SourcePairs
from program.adaptation.labeled import pairs_bytes, pairs_from_bytes
from program.adaptation.pairs import Pairs
from program.adaptation.synthetic_rows import corpus_file, document_source

log = logging.getLogger(__name__)

ROWS_FILE = "own_rows.npz"
REFIT_SHARE = 0.25  # past this share of changed chunks, every row is made again


@dataclass(frozen=True)
class Refresh:
    """How the rows of one adaptation were had.

    Attributes:
        how: ``"made"`` (every row made now), ``"refit"`` (rows of unchanged files kept) or
            ``"kept"`` (no file changed since the rows were made).
        changed: corpus files whose rows were made again (added or changed) or dropped (removed).
        share: the share of chunks in those files (removed files' counted as they were).
        why: for ``made``, why the saved rows were not built on; else "".
    """

    how: str
    changed: tuple[str, ...] = ()
    share: float = 1.0
    why: str = ""

    def line(self) -> str:
        """``refit: rows of 2 changed files made again (1.3 % of the chunks), the rest kept`` or
        ``rows made from every document (no saved rows)``."""
        if self.how == "made":
            return f"rows made from every document ({self.why})"
        if self.how == "kept":
            return "rows kept (no document changed since they were made)"
        return (f"refit: rows of {len(self.changed)} changed file(s) made again ({self.share:.1%} of the chunks), "
                "the rest kept")


def _file_chunks(kb) -> tuple[dict[str, str], dict[str, int]]:
    """The knowledge base's corpus files (-> sha256) and their chunk counts now."""
    manifest = kb.manifest or {}
    root = str(manifest.get("source_path") or "")
    return dict(manifest.get("files") or {}), dict(Counter(corpus_file(c, root) for c in kb.chunks))


def _saved(state, options: str) -> tuple[dict | None, SourcePairs | None, str]:
    """``(meta, rows, why not)`` of the rows saved in ``state``: None and the reason when there are
    none, they are unreadable, or they were made with other ``options``."""
    data = state.read(ROWS_FILE)
    if data is None:
        return None, None, "no saved rows"
    try:
        meta, sources = pairs_from_bytes(data)
    except ValueError as exc:
        log.warning("%s/%s is unreadable (%s): making the rows again", state.where, ROWS_FILE, exc)
        return None, None, "the saved rows are unreadable"
    if meta.get("options") != options or len(sources) != 1:
        return None, None, "the saved rows were made with other options or code"
    return meta, replace(sources[0], files=dict(meta.get("groups") or {})), ""


def _subset(pairs: Pairs, keep) -> Pairs:
    """The rows of ``pairs`` whose group ``keep`` accepts."""
    out = Pairs() if pairs.cues is not None else Pairs(cues=None)
    for i, group in enumerate(pairs.groups):
        if keep(group):
            out.add(pairs.dense[i], pairs.cues[i] if pairs.cues is not None else None, pairs.labels[i], group,
                    pairs.targets[i], pairs.texts[i] if pairs.texts else None)
    return out


def _merge(kept: SourcePairs, fresh: SourcePairs, dropped: set[str]) -> SourcePairs:
    """``kept`` without the rows of the ``dropped`` files, with ``fresh`` added."""
    def keep(group: str) -> bool:
        return kept.files.get(group) not in dropped

    parts = [(_subset(getattr(kept, k), keep).extend(getattr(fresh, k))) for k in ("passage", "strip", "support")]
    files = {g: f for g, f in kept.files.items() if f not in dropped} | fresh.files
    expected = {g: a for g, a in kept.expected.items() if keep(g)} | fresh.expected
    counts = {"asked": kept.counts.get("asked", 0) + fresh.counts.get("asked", 0),
              "kept": sum(1 for g in expected if not g.endswith("-out"))}
    return replace(fresh, passage=parts[0], strip=parts[1], support=parts[2], expected=expected, counts=counts,
                   files=files)


def own_rows(name: str, kb, embedder, state, options: str, *, seed: int = 0, written=None, force: bool = False,
             log_line=print) -> tuple[SourcePairs, Refresh]:
    """The knowledge base's own rows for this adaptation, built on the rows saved in ``state``
    where few chunks changed (see the module docstring), and saved there again.

    Args:
        name, kb, embedder, seed, written: as ``document_source``'s.
        state: the knowledge base's state (``program.judges.adapted.adapted_state``).
        options: what else the rows depend on (``program.adaptation.adapt.rows_stamp``): saved
            rows made with other options are not built on.
        force: make every row again.

    Returns:
        ``(rows, how they were had)``.

    Raises:
        ValueError: as ``document_source`` (no question to ask).
        OSError: the rows cannot be saved.
    """
    files, chunks_now = _file_chunks(kb)
    meta, saved, why = (None, None, "asked to adapt again") if force else _saved(state, options)
    refresh = Refresh("made", why=why)
    if saved is not None:
        before, chunks_before = meta.get("files") or {}, meta.get("file_chunks") or {}
        changed = {f for f in files if before.get(f) != files[f]} | {f for f in before if f not in files}
        share = (sum(chunks_now.get(f, 0) if f in files else chunks_before.get(f, 0) for f in changed)
                 / max(1, sum(chunks_now.values())))
        if share <= REFIT_SHARE:
            refresh = Refresh("refit" if changed else "kept", tuple(sorted(changed)), share)
        else:
            refresh = Refresh("made", tuple(sorted(changed)), share,
                              f"{share:.0%} of the chunks changed, over {REFIT_SHARE:.0%}")
    if refresh.how == "made":
        rows = document_source(name, kb, embedder, seed=seed, written=written, log=log_line)
    else:
        fresh = document_source(name, kb, embedder, seed=seed, written=written, log=log_line,
                                files=set(refresh.changed) & set(files))
        rows = _merge(saved, fresh, set(refresh.changed))
    state.write(ROWS_FILE, pairs_bytes([rows], {"options": options, "files": files, "file_chunks": chunks_now,
                                                "groups": rows.files}))
    return rows, refresh


def rows_key(options: dict) -> str:
    """16 hex digits naming ``options`` (JSON-able) for :func:`own_rows`."""
    return hashlib.sha256(json.dumps(options, sort_keys=True).encode()).hexdigest()[:16]


__all__ = ["REFIT_SHARE", "ROWS_FILE", "Refresh", "own_rows", "rows_key"]
