"""Broken corpora for the bad-input suite: each a builder of a real file or folder on disk and
the one-line message (a regular expression) the program must answer it with.

``BROKEN_CORPORA[name] = (build(folder) -> path, message pattern)``. The pattern names the file
(or folder) and the problem; ``{path}`` in it is replaced by the built path, escaped.
"""

from __future__ import annotations

import os
from pathlib import Path


def _empty_file(d: Path) -> Path:
    (p := d / "empty.jsonl").write_text("")
    return p


def _binary_file(d: Path) -> Path:
    (p := d / "binary.jsonl").write_bytes(bytes(range(256)) * 8)
    return p


def _binary_markdown(d: Path) -> Path:
    (p := d / "notes.md").write_bytes(b"# Notes\n\nPNG\x00\x00\x1a\n" + bytes(range(200)))
    return p


def _latin1(d: Path) -> Path:
    (p := d / "latin1.jsonl").write_bytes('{"id": "a", "text": "Caf\u00e9 au lait costs 3 euros."}\n'.encode("latin-1"))
    return p


def _truncated_jsonl(d: Path) -> Path:
    (p := d / "truncated.jsonl").write_text('{"id": "a", "text": "Refunds take 5 days."}\n{"id": "b", "text": "Pay')
    return p


def _not_an_object(d: Path) -> Path:
    (p := d / "list.jsonl").write_text('["id", "text"]\n')
    return p


def _no_text_field(d: Path) -> Path:
    (p := d / "notext.jsonl").write_text('{"id": "a", "body": "Refunds take 5 days."}\n')
    return p


def _huge_line(d: Path) -> Path:
    p = d / "huge.jsonl"
    with open(p, "w") as f:
        f.write('{"id": "a", "text": "')
        chunk = "refund " * 150_000  # ~1 MB
        for _ in range(50):
            f.write(chunk)
        f.write('"}\n')
    return p


def _symlink_loop(d: Path) -> Path:
    a, b = d / "loop-a.md", d / "loop-b.md"
    os.symlink(b.name, a)
    os.symlink(a.name, b)
    return a


def _folder_of_symlink_loops(d: Path) -> Path:
    folder = d / "loops"
    folder.mkdir()
    os.symlink("two.md", folder / "one.md")
    os.symlink("one.md", folder / "two.md")
    os.symlink("..", folder / "up")  # a folder loop: not followed
    return folder


def _unreadable(d: Path) -> Path:
    # /proc/self/mem reads fail with EIO for every user, root included (chmod 000 does not stop root)
    p = d / "unreadable.jsonl"
    os.symlink("/proc/self/mem", p)
    return p


def _nothing_loadable(d: Path) -> Path:
    folder = d / "nothing"
    folder.mkdir()
    (folder / "slides.pdf").write_bytes(b"%PDF-1.4\n")  # a PDF cut off after its header
    (folder / "data.rtf").write_text("a,b\n1,2\n")
    (folder / "blank.md").write_text("   \n\n")
    return folder


def _duplicate_ids(d: Path) -> Path:
    (p := d / "dup.jsonl").write_text('{"id": "a", "text": "one"}\n{"id": "a", "text": "two"}\n')
    return p


def _duplicate_ids_across_files(d: Path) -> Path:
    folder = d / "two-files"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"id": "x", "text": "one"}\n')
    (folder / "b.jsonl").write_text('{"id": "x", "text": "two"}\n')
    return folder


def _missing(d: Path) -> Path:
    return d / "no-such-folder"


def _unsupported_file(d: Path) -> Path:
    (p := d / "report.rtf").write_bytes(b"{\\rtf1 report}\n")
    return p


BROKEN_CORPORA = {
    "empty file": (_empty_file, r"empty corpus: no document with text under {path} "),
    "binary file": (_binary_file, r"{path} is a binary file, not text \(NUL byte at offset 0\)"),
    "binary markdown": (_binary_markdown, r"{path} is a binary file, not text \(NUL byte at offset 12\)"),
    "not UTF-8": (_latin1, r"{path} is not UTF-8 text: byte 0xe9 at offset 24 \(line 1\); convert it"),
    "truncated JSONL": (_truncated_jsonl, r"malformed JSONL at {path}:2: not JSON: Unterminated string"),
    "JSONL line not an object": (_not_an_object, r"malformed JSONL at {path}:1: expected an object, got list"),
    "JSONL line without text": (_no_text_field, r"malformed JSONL at {path}:1: no text field"),
    "one 50 MB line": (_huge_line, r"line too long at {path}:1: 50\.\d MB; one document may hold at most 10\.0 MB"),
    "symlink loop": (_symlink_loop, r"corpus path {path} is a symlink loop"),
    "folder of symlink loops": (_folder_of_symlink_loops,
                                r"empty corpus: no document with text under {path} .*one\.md: symlink loop"),
    "unreadable file": (_unreadable, r"cannot read {path}: Input/output error"),
    "folder with nothing loadable": (_nothing_loadable,
                                     r"empty corpus: no document with text under {path} \(2 supported file\(s\), "
                                     r"1 skipped, 1 unreadable, 1 empty\); left out data\.rtf: unsupported type \.rtf; "
                                     r"{path}/slides\.pdf is not a readable PDF"),
    "duplicate ids": (_duplicate_ids, r"duplicate document id 'a' at {path}:2 \(first seen at {path}:1\)"),
    "duplicate ids across files": (_duplicate_ids_across_files, r"duplicate document id 'x' at {path}/b\.jsonl:1 "
                                                                r"\(first seen at {path}/a\.jsonl:1\)"),
    "missing path": (_missing, r"(--kb )?{path}: no such file or folder"),
    "unsupported file type": (_unsupported_file, r"unsupported corpus file type '\.rtf': {path}"),
}


def build(name: str, folder: Path) -> tuple[Path, str]:
    """Build the broken corpus ``name`` under ``folder``: ``(path, message pattern)``."""
    import re

    builder, pattern = BROKEN_CORPORA[name]
    folder.mkdir(parents=True, exist_ok=True)
    path = builder(folder)
    return path, pattern.replace("{path}", re.escape(str(path)))
