"""A PostgreSQL with pgvector for the retrieval measurements: the one you name, or a throwaway
server from the ``pgserver`` wheel (``pip install pgserver``) on a temporary folder."""

from __future__ import annotations

import contextlib
import tempfile


def add_database_option(parser, note: str = "") -> None:
    """``--pg-url`` on ``parser``: the server ``database`` yields (default: a throwaway one);
    ``note`` says what the measurement writes there."""
    parser.add_argument("--pg-url", default=None, help="libpq URL of a PostgreSQL with pgvector"
                        + (f", {note}" if note else "") + " (default: a throwaway pgserver one)")


@contextlib.contextmanager
def database(url: str | None = None):
    """Yield a libpq URL: ``url`` itself, or that of a server started on a temporary data folder
    and stopped (folder deleted) on exit.

    Raises:
        SystemExit: no ``url`` and ``pgserver`` is not installed.
    """
    if url:
        yield url
        return
    try:
        import pgserver
    except ImportError:
        raise SystemExit("error: pass --pg-url postgresql://... or pip install pgserver") from None
    with tempfile.TemporaryDirectory(prefix="crag-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="delete")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()


def with_table(url: str, table: str) -> str:
    """``url`` with ``table=...`` added as a query parameter."""
    return f"{url}{'&' if '?' in url else '?'}table={table}"
