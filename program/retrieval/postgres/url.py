"""``postgresql://`` knowledge-base URLs: the connection part and the table part.

A knowledge base in PostgreSQL is named by a libpq URL plus a ``table`` query parameter::

    postgresql://user:password@host:5432/db?table=docs
    postgresql://postgres@/postgres?host=/tmp/pgdata&table=docs     # Unix socket

``table`` is not a libpq parameter, so it is taken out before connecting; every other
parameter (``host``, ``sslmode``, ``connect_timeout``...) goes to libpq unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

SCHEMES = ("postgresql", "postgres")
DEFAULT_TABLE = "crag_chunks"
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,40}$")


def is_database_url(location) -> bool:
    """True when ``location`` (a str or path) is a ``postgresql://`` or ``postgres://`` URL."""
    return isinstance(location, str) and location.split("://", 1)[0].lower() in SCHEMES and "://" in location


@dataclass(frozen=True)
class DatabaseURL:
    """A parsed knowledge-base URL.

    Attributes:
        conninfo: the URL without ``table``, for libpq (may hold a password).
        table: the chunks table; the knowledge base also owns ``<table>_files``,
            ``<table>_staging``, ``<table>_terms`` and ``<table>_meta``.
        display: the URL with any password replaced by ``***``, for messages and logs.
    """

    conninfo: str
    table: str
    display: str

    @classmethod
    def parse(cls, url: str) -> "DatabaseURL":
        """Split ``url`` (see the module docstring).

        Raises:
            ValueError: not a postgresql URL, or a table name that is not a lower-case SQL
                identifier of at most 41 characters (letters, digits, underscores).
        """
        if not is_database_url(url):
            raise ValueError(f"not a postgresql:// URL: {url!r}")
        parts = urlsplit(url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        tables = [v for k, v in query if k == "table"]
        table = tables[-1] if tables else DEFAULT_TABLE
        if not _IDENTIFIER.match(table):
            raise ValueError(f"bad table name {table!r} in the knowledge-base URL: use lower-case letters, "
                             f"digits and underscores, at most 41 characters, not starting with a digit")
        rest = urlencode([(k, v) for k, v in query if k != "table"])
        conninfo = urlunsplit((parts.scheme, parts.netloc, parts.path, rest, ""))
        netloc = parts.netloc
        if parts.password is not None:
            netloc = netloc.replace(f":{parts.password}@", ":***@", 1)
        display = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query), ""))
        return cls(conninfo, table, display)

    def __str__(self) -> str:
        return self.display
