"""Write a file so that a kill or a full disk mid-write leaves the previous version in place."""

from __future__ import annotations

import os
import threading
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` all or nothing: into a temporary file beside it (unique to this
    process and thread), flushed to disk, then renamed over ``path`` (``os.replace`` is atomic on
    one file system). On any error the temporary file is removed and ``path`` is untouched.

    Returns ``path``. Raises ``OSError`` (no space, no permission) after cleaning up.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.{threading.get_ident()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode(encoding) if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
