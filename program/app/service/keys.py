"""Keys that reach only what their holders may read: the keys file and who a request is.

The operator's keys file (``serve --keys FILE``, env ``CRAG_SERVE_KEYS``) is TOML, one ``[[keys]]``
table per key::

    [[keys]]
    name = "hr"                      # what the audit line names (never the secret)
    sha256 = "9f2c…"                 # the key's SHA-256, hex: the key itself is never stored
    [keys.knowledge_bases]           # the knowledge bases it may ask, by their served names
    handbook = ["hr/**", "policies/*.pdf"]      # path globs inside it ...
    runbooks = { paths = ["db/**"], types = ["md"] }   # ... or a whole filter
    kubernetes = ["**"]              # everything in it

``python -m program key NAME --kb handbook=hr/** --keys-file FILE`` makes a key, appends its entry
and prints the key once. A key's scope is a ``DocumentFilter`` per knowledge base that a request's
own filter is intersected with (``program.retrieval.filters``), never replaced by; a knowledge base
it does not list is answered as one the server lacks (404), and ``/v1/models`` does not list it.

The file is read again when it changes (its modification time or size), before the next request
is authorised; a file that became unreadable or invalid keeps the keys last read, with one error
line in the log. Keys are compared by their SHA-256 in constant time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

from program.atomic import write_atomic
from program.retrieval.filters import DocumentFilter, FilterError

log = logging.getLogger("program.service")
EVERYTHING = "**"


class KeysFileError(ValueError):
    """A keys file that cannot be used; one line naming the file and the entry."""


@dataclass(frozen=True)
class Principal:
    """Who asks: a key's name and what it may read.

    Attributes:
        name: the key's name (``operator`` for ``--api-key``, ``anyone`` on a server without keys).
        scopes: knowledge-base name -> the filter its documents are read through (None: all of
            them); None for every knowledge base, whole.
    """

    name: str
    scopes: dict[str, DocumentFilter | None] | None = None

    def may_ask(self, knowledge_base: str) -> bool:
        """True when this key may ask ``knowledge_base`` (a served name)."""
        return self.scopes is None or knowledge_base in self.scopes

    def scope(self, knowledge_base: str) -> DocumentFilter | None:
        """The filter a question to ``knowledge_base`` is held to (None: the whole of it)."""
        return None if self.scopes is None else self.scopes.get(knowledge_base)

    def documents(self, knowledge_base: str, asked: DocumentFilter | None) -> DocumentFilter | None:
        """The documents a question reads: the request's filter ``asked`` within this key's scope."""
        scope = self.scope(knowledge_base)
        return asked if scope is None else scope & asked


ANYONE = Principal("anyone")
OPERATOR = Principal("operator")


def key_hash(key: str) -> str:
    """The SHA-256 of ``key`` (UTF-8), 64 hex digits: what the keys file stores."""
    return hashlib.sha256(key.encode()).hexdigest()


def _scope(where: str, value) -> DocumentFilter | None:
    if isinstance(value, list):
        if any(not isinstance(g, str) for g in value) or not value:
            raise KeysFileError(f"{where}: expected a list of path globs, a filter table, or [\"**\"] for everything")
        return None if EVERYTHING in value else DocumentFilter.parse({"paths": value})
    if isinstance(value, dict):
        return DocumentFilter.parse(value)
    raise KeysFileError(f"{where}: expected a list of path globs or a filter table, got {type(value).__name__}")


def parse_keys(text: str, path: str = "keys file") -> dict[str, Principal]:
    """The keys of a keys file's ``text``: SHA-256 hex -> :class:`Principal`.

    Raises:
        KeysFileError: not TOML, an entry without a name, hash or knowledge base, a bad filter,
            or a name or hash given twice (one line naming the file and the entry)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KeysFileError(f"{path}: not TOML ({exc})") from None
    entries = data.get("keys", [])
    if not isinstance(entries, list) or set(data) - {"keys"}:
        raise KeysFileError(f"{path}: expected [[keys]] tables only")
    out: dict[str, Principal] = {}
    names = set()
    for i, entry in enumerate(entries, start=1):
        where = f"{path}: key {i}" + (f" ({entry.get('name')!r})" if isinstance(entry.get("name"), str) else "")
        name, digest, bases = entry.get("name"), str(entry.get("sha256", "")).lower(), entry.get("knowledge_bases")
        if not isinstance(name, str) or not name.strip():
            raise KeysFileError(f"{where}: needs a name")
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            raise KeysFileError(f"{where}: sha256 must be the key's SHA-256 in 64 hex digits")
        if not isinstance(bases, dict) or not bases:
            raise KeysFileError(f"{where}: needs [keys.knowledge_bases] naming what it may ask")
        if unknown := sorted(set(entry) - {"name", "sha256", "knowledge_bases"}):
            raise KeysFileError(f"{where}: unknown field {unknown[0]!r}")
        if name in names or digest in out:
            raise KeysFileError(f"{where}: {'name' if name in names else 'key'} given twice")
        try:
            scopes = {kb: _scope(f"{where}: {kb}", value) for kb, value in bases.items()}
        except FilterError as exc:
            raise KeysFileError(f"{where}: {exc}") from None
        names.add(name)
        out[digest] = Principal(name, scopes)
    return out


class KeysFile:
    """The operator's keys file, read again when it changes.

    Raises (at construction):
        KeysFileError: the file is missing, unreadable or invalid (one line)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._keys = self._read(strict=True)

    def _stamp(self) -> tuple[int, int] | None:
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_mtime_ns, st.st_size

    def _read(self, strict: bool) -> dict[str, Principal]:
        stamp = self._stamp()
        try:
            keys = parse_keys(self.path.read_text(encoding="utf-8"), str(self.path))
        except (OSError, UnicodeDecodeError, KeysFileError) as exc:
            line = str(exc) if isinstance(exc, KeysFileError) else f"{self.path}: cannot read the keys file ({exc})"
            if strict:
                raise KeysFileError(line) from None
            log.error("%s; keeping the %d keys read before", line, len(self._keys))
            self._seen = stamp  # said once per version of the file
            return self._keys
        self._seen = stamp
        return keys

    def keys(self) -> dict[str, Principal]:
        """SHA-256 -> principal, as the file says now (read again if it changed)."""
        with self._lock:
            if self._stamp() != self._seen:
                self._keys = self._read(strict=False)
                log.info("keys file %s read: %d keys", self.path, len(self._keys))
            return self._keys

    def principal(self, key: str) -> Principal | None:
        """Who holds ``key``, or None for a key the file does not list (every entry compared)."""
        digest, found = key_hash(key).encode(), None
        for known, principal in self.keys().items():
            if hmac.compare_digest(digest, known.encode()):
                found = principal
        return found


def new_key_entry(name: str, scopes: dict[str, list[str]]) -> tuple[str, str]:
    """A new random key (32 bytes, URL-safe) and its keys-file entry (TOML) for ``name`` reading
    ``scopes`` (knowledge base -> path globs)."""
    key = "crag-" + secrets.token_urlsafe(32)
    lines = ["[[keys]]", f"name = {_toml_string(name)}", f"sha256 = \"{key_hash(key)}\"", "[keys.knowledge_bases]"]
    lines += [f"{_toml_string(kb)} = [{', '.join(_toml_string(g) for g in globs)}]" for kb, globs in scopes.items()]
    return key, "\n".join(lines) + "\n"


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def append_entry(path: str | Path, entry: str) -> None:
    """Add ``entry`` to the keys file at ``path`` (made if missing): the new file is written beside
    it and renamed over it, so a kill leaves the previous file or the new one, never half of one.

    Raises:
        KeysFileError: the result would not be a valid keys file (a name given twice)."""
    path = Path(path)
    before = path.read_text(encoding="utf-8") if path.exists() else ""
    after = before + ("\n" if before and not before.endswith("\n\n") else "") + entry
    parse_keys(after, str(path))
    write_atomic(path, after)
    os.chmod(path, 0o600)  # hashes only, yet no one else's business


__all__ = ["ANYONE", "OPERATOR", "KeysFile", "KeysFileError", "Principal", "append_entry", "key_hash",
           "new_key_entry", "parse_keys"]
