"""Which files a knowledge-base folder holds, and which it leaves out and why.

A folder is searched recursively in sorted path order; hidden files and folders (``.git``, editor
swap files) are not looked at. A supported file is read; anything else inside the folder is left
out, never opened, and named by :func:`left_out`: an unsupported type, a broken or looping
symlink, a FIFO, socket or device, and a symlink (to a file or to a folder) that leads outside the
folder (``passwd.md -> /etc/passwd``, ``shared -> /srv/shared``), whose text would otherwise reach
clients. ``CRAG_OUTSIDE_LINKS=follow`` reads those links, a folder's files included, each real
folder once (a link back to where the walk has been is not walked again); :func:`outside_links`
names them. A symlink to a folder inside the knowledge base is not walked: its files are read
where they really are.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from program.retrieval.errors import CorpusError
from program.retrieval.formats import CONVERTED_EXTS

JSONL_EXTS = {".jsonl"}
MARKDOWN_EXTS = {".md", ".markdown"}
TEXT_EXTS = {".txt"}
HTML_EXTS = {".html", ".htm"}
SUPPORTED_EXTS = JSONL_EXTS | MARKDOWN_EXTS | TEXT_EXTS | HTML_EXTS | CONVERTED_EXTS


def list_source_files(path: str | Path) -> tuple[list[Path], list[Path]]:
    """Return ``(supported_files, skipped_files)`` under ``path``, each sorted (see the module docstring).

    Raises:
        CorpusError: a missing path, a broken or looping symlink or a FIFO as ``path``, a single
            file with an unsupported extension, or a ``CRAG_OUTSIDE_LINKS`` that is not
            ``follow`` or ``refuse``.
    """
    p = Path(path)
    if not p.exists():
        if p.is_symlink():
            raise CorpusError(f"corpus path {p} is a {_symlink_problem(p)}")
        raise CorpusError(f"{p}: no such file or folder")
    if not p.is_file() and not p.is_dir():  # a FIFO would block the read for ever
        raise CorpusError(f"corpus path {p} is {_special_kind(p)}")
    if p.is_file():
        if p.suffix.lower() not in SUPPORTED_EXTS:
            raise CorpusError(f"unsupported corpus file type {p.suffix!r}: {p} "
                              f"(supported: {', '.join(sorted(SUPPORTED_EXTS))})")
        return [p], []
    files, skipped = [], []
    follow = follows_outside_links()
    for f in _entries(p, follow)[0]:
        readable = f.suffix.lower() in SUPPORTED_EXTS and f.is_file() and (follow or link_target(p, f) is None)
        (files if readable else skipped).append(f)
    return files, skipped


def _entries(root: Path, follow: bool) -> tuple[list[Path], list[Path]]:
    """``(entries, followed)``: every entry under the folder ``root`` but its folders, sorted, hidden
    ones left out, each named by its path under ``root`` (not where a link leads). A symlink to a
    folder inside ``root`` is not walked (its files are listed where they are). One to a folder
    outside is an entry of its own, unless ``follow``: then it is walked like a folder (each real
    folder once, so that no link makes a loop) and listed in ``followed``. Folders that cannot be
    listed are passed over, as ``Path.rglob`` does."""
    real_root = root.resolve()
    walked, out, followed, stack = {real_root}, [], [], [root]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                names = sorted((e.name, e.is_dir(follow_symlinks=False)) for e in it)
        except OSError:
            continue
        for name, is_folder in names:
            if name.startswith("."):
                continue  # hidden files and folders (.git, editor swap files)
            entry = folder / name
            if is_folder:
                if (real := entry.resolve()) not in walked:  # under a followed link, a folder walked already
                    walked.add(real)
                    stack.append(entry)
            elif not entry.is_dir():  # a file, a special file, a broken link: an entry
                out.append(entry)
            elif (target := link_target(root, entry)) is None:
                continue  # a link to a folder inside: its files are listed where they are
            elif not follow:
                out.append(entry)  # a link to a folder outside: left out, and said so
            elif target not in walked:  # followed, once
                walked.add(target)
                followed.append(entry)
                stack.append(entry)
    return sorted(out), sorted(followed)


def follows_outside_links() -> bool:
    """True when ``CRAG_OUTSIDE_LINKS=follow``: a file (or folder) in a knowledge-base folder that
    links outside it is read. By default it is left out (a ``passwd.txt -> /etc/passwd`` would be
    served to clients). Raises ``CorpusError`` for a value other than ``follow`` or ``refuse``."""
    value = os.environ.get("CRAG_OUTSIDE_LINKS", "").strip().lower()
    if value not in ("", "follow", "refuse"):
        raise CorpusError(f"CRAG_OUTSIDE_LINKS must be follow or refuse, got {value!r}")
    return value == "follow"


def link_target(root: Path, f: Path) -> Path | None:
    """Where ``f`` (under the folder ``root``) really is when a symlink takes it outside ``root``, else None."""
    try:
        target = f.resolve(strict=True)
    except (OSError, RuntimeError):
        return None  # a broken link or a loop: skipped for that (``_skip_reason``)
    return None if target.is_relative_to(root.resolve()) else target


def outside_links(path: str | Path) -> list[str]:
    """``"name -> target"`` for each file or folder under the folder ``path`` that links outside it
    (a folder once, not each of its files). Raises nothing."""
    root = Path(path)
    if not root.is_dir():
        return []
    return [f"{f.relative_to(root).as_posix()} -> {target}" for f in _entries(root, follow=False)[0]
            if (f.is_file() or f.is_dir()) and (target := link_target(root, f)) is not None]


def _special_kind(p: Path) -> str:
    """What a path that is neither a regular file nor a folder is, e.g. ``"not a regular file (FIFO)"``."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return "not a regular file"
    kinds = ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
             (stat.S_ISBLK, "block device"))
    kind = next((name for test, name in kinds if test(mode)), "")
    return f"not a regular file ({kind})" if kind else "not a regular file"


def _symlink_problem(p: Path) -> str:
    """``"symlink loop"`` or ``"broken symlink (to X)"`` for a symlink that does not resolve."""
    try:
        p.resolve(strict=True)
    except RuntimeError:  # Python 3.11 reports a loop this way
        return "symlink loop"
    except OSError as exc:
        if getattr(exc, "errno", None) == 40:  # ELOOP
            return "symlink loop"
    return f"broken symlink (to {os.readlink(p)})"


def skip_reason(f: Path) -> str:
    """Why the loader leaves out ``f``, a skipped entry of ``list_source_files``, in a few words. Raises nothing."""
    if f.is_symlink() and not f.exists():
        return _symlink_problem(f)
    if f.is_dir():  # a link to a folder outside
        return (f"links outside the knowledge base (to the folder {f.resolve()}); "
                "CRAG_OUTSIDE_LINKS=follow reads it")
    if f.is_file() and f.suffix.lower() in SUPPORTED_EXTS:  # left out for where it leads
        return f"links outside the knowledge base (to {f.resolve()}); CRAG_OUTSIDE_LINKS=follow reads it"
    if not f.is_file():
        return _special_kind(f)
    return f"unsupported type {f.suffix or '(none)'}"


def left_out(path: str | Path) -> list[str]:
    """The entries under the folder ``path`` the loader skips, one ``"name: why"`` each (``[]`` for a
    single file or a missing path): unsupported types, broken or looping symlinks, FIFOs, sockets,
    devices, links to files or folders outside it. Hidden files and folders are not listed.
    Raises ``CorpusError`` as ``list_source_files``."""
    root = Path(path)
    if not root.is_dir():
        return []
    return [f"{s.relative_to(root).as_posix()}: {skip_reason(s)}" for s in list_source_files(root)[1]]
