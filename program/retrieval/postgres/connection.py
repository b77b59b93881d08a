"""A pool of PostgreSQL connections with bounded retries on a lost connection.

Every statement of the knowledge base runs through :meth:`Database.run`: it borrows a
connection from a ``psycopg_pool.ConnectionPool`` (checked before use, pgvector's types
registered on each new connection), runs the caller's function in one transaction, and on a
connection-level failure (server restarted, backend terminated, network cut: psycopg's
``OperationalError``) discards that connection and runs the whole function again, at most
``attempts`` times in all, ``backoff`` seconds apart and doubling. The function must therefore
be safe to repeat (one transaction: it either committed or did nothing). After the last
attempt :class:`KnowledgeBaseUnavailable` says which server and why, in one line.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, TypeVar

from program.retrieval.base import KnowledgeBaseError
from program.retrieval.postgres.url import DatabaseURL

log = logging.getLogger(__name__)
T = TypeVar("T")


class KnowledgeBaseUnavailable(KnowledgeBaseError):
    """The PostgreSQL server cannot be reached, or the connection kept dropping."""


def _configure(conn) -> None:
    """Register pgvector's types on a new connection (none yet in a database without the
    extension: the index run creates it, then renews the pool's connections)."""
    # psycopg loads only when a database is used (program.retrieval imports this package)
    import psycopg
    from pgvector.psycopg import register_vector

    try:
        register_vector(conn)
    except psycopg.ProgrammingError:  # "vector type not found in the database"
        pass
    conn.rollback()  # leave no transaction open in the pool


class Database:
    """Pooled, retried access to one PostgreSQL database.

    Args:
        url: the parsed knowledge-base URL.
        min_size / max_size: connections the pool keeps open / may open.
        attempts: tries per :meth:`run` (1 = no retry).
        backoff: seconds before the first retry, doubled for each next one.
        connect_timeout: seconds to wait for a connection before giving up on an attempt.

    Raises:
        KnowledgeBaseUnavailable: (when opening) the pgvector extension's types cannot be
            registered, i.e. the server is unreachable after ``attempts`` tries.
    """

    def __init__(self, url: DatabaseURL, *, min_size: int = 1, max_size: int = 4, attempts: int = 3,
                 backoff: float = 0.2, connect_timeout: float = 10.0):
        # lazy on purpose, as _configure
        from psycopg_pool import ConnectionPool

        self.url, self.attempts, self.backoff, self.connect_timeout = url, max(1, attempts), backoff, connect_timeout
        self._pool = ConnectionPool(url.conninfo, min_size=min_size, max_size=max_size, open=False,
                                    configure=_configure, check=ConnectionPool.check_connection,
                                    name=f"crag-kb-{url.table}")
        self._pool.open(wait=False)

    def run(self, fn: Callable[..., T], *, what: str = "query") -> T:
        """``fn(conn)`` inside one transaction on a pooled connection, retried on a lost connection.

        Returns:
            What ``fn`` returns (after the transaction committed).

        Raises:
            KnowledgeBaseUnavailable: every attempt failed to connect or lost the connection;
                the message names the server (password hidden), the attempts and the last error.
            Whatever else ``fn`` raises (SQL errors are not retried: repeating would not help).
        """
        # lazy on purpose, as _configure
        import psycopg
        from psycopg_pool import PoolTimeout

        delay, last = self.backoff, None
        for attempt in range(1, self.attempts + 1):
            try:
                with self._pool.connection(timeout=self.connect_timeout) as conn:
                    with conn.transaction():
                        return fn(conn)
            except (psycopg.OperationalError, PoolTimeout) as exc:
                last = exc
                log.warning("%s on %s failed (attempt %d of %d): %s", what, self.url, attempt, self.attempts,
                            _one_line(exc))
                if attempt < self.attempts:
                    time.sleep(delay)
                    delay *= 2
        raise KnowledgeBaseUnavailable(
            f"cannot reach the knowledge base at {self.url}: {what} failed {self.attempts} times, "
            f"last: {_one_line(last)}")

    def connection(self):
        """A pooled connection as a context manager, for long work that manages its own
        transactions (ingestion); no retry."""
        return self._pool.connection(timeout=self.connect_timeout)

    def renew(self) -> None:
        """Replace every pooled connection (after ``CREATE EXTENSION vector``, so that new ones
        know the type)."""
        self._pool.drain()

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()


def _one_line(exc) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:300]
