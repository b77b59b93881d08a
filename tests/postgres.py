"""A real PostgreSQL server with pgvector for the tests: the ``pgserver`` wheel, on a temporary
data directory (no mock, no system install)."""

from __future__ import annotations

import itertools
from pathlib import Path

_tables = itertools.count()


def start(data_dir: Path):
    """Start (or join) a server on ``data_dir``; ``.get_uri()`` gives its libpq URL, ``.cleanup()`` stops it."""
    import pgserver

    return pgserver.get_server(str(data_dir), cleanup_mode="stop")


def kb_url(server, table: str | None = None) -> str:
    """A knowledge-base URL on ``server``: its database, a fresh table name unless given."""
    return f"{server.get_uri()}&table={table or f'kb_{next(_tables)}'}"


def as_an_earlier_version(url: str, *statements: str) -> None:
    """Run ``statements`` on the knowledge base at ``url``, each with ``{t}`` its table name: a
    table left as an earlier version of the program built it."""
    import psycopg

    from program.retrieval.postgres.url import DatabaseURL

    parsed = DatabaseURL.parse(url)
    with psycopg.connect(parsed.conninfo) as conn:
        for statement in statements:
            conn.execute(statement.replace("{t}", parsed.table))
