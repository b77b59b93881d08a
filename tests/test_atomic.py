"""``program.atomic.write_atomic``, the one way the program replaces a file: all or nothing."""

from __future__ import annotations

import errno
import os
import threading

import pytest

from program.atomic import write_atomic


def test_a_write_that_fails_half_way_leaves_the_previous_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "judges.json"
    write_atomic(path, '{"version": 1}\n')

    def full_disk(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(path, '{"version": 2}\n')
    assert path.read_text() == '{"version": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["judges.json"]


def test_threads_writing_the_same_file_never_leave_it_mixed(tmp_path):
    path = tmp_path / "page.json"
    texts = [str(n) * 100_000 for n in range(8)]
    threads = [threading.Thread(target=write_atomic, args=(path, t)) for t in texts]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_text() in texts  # one writer's text whole, never a mix
    assert sorted(p.name for p in tmp_path.iterdir()) == ["page.json"]


def test_bytes_are_written_as_they_are(tmp_path):
    assert write_atomic(tmp_path / "v.npy", b"\x93NUMPY\x00").read_bytes() == b"\x93NUMPY\x00"
