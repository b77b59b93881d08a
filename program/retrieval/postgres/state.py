"""What was learned about a pgvector knowledge base, kept in its database beside its chunks.

Table ``T_state`` (for a knowledge base of table ``T``): one row per (``namespace``, ``name``),
``body bytea`` and ``written timestamptz``. The namespace is the compile the judges were adapted
for; the names are those of ``program.state.KnowledgeBaseState`` (``judges.json``,
``operating_point.json``, ...). Every app server over the knowledge base reads the same rows, so
all of them judge it alike; a write is one statement (all or nothing).
"""

from __future__ import annotations

from psycopg import sql


def _table(table: str) -> sql.Identifier:
    return sql.Identifier(table + "_state")


def ensure(conn, table: str) -> None:
    """Create ``T_state`` when missing."""
    conn.execute(sql.SQL("""CREATE TABLE IF NOT EXISTS {t} (namespace text NOT NULL, name text NOT NULL,
        body bytea NOT NULL, written timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (namespace, name))""")
                 .format(t=_table(table)))


class DatabaseState:
    """Blobs of one namespace in ``T_state`` (``program.state.KnowledgeBaseState``).

    Args:
        db: the knowledge base's ``program.retrieval.postgres.connection.Database``.
        namespace: e.g. the compile's id.
    """

    def __init__(self, db, namespace: str):
        self._db, self.namespace = db, namespace
        self.where = f"table {db.url.table}_state of {db.url} ({namespace})"

    def read(self, name: str) -> bytes | None:
        def run(conn):
            if conn.execute("SELECT to_regclass(%s) IS NULL", [self._db.url.table + "_state"]).fetchone()[0]:
                return None
            row = conn.execute(sql.SQL("SELECT body FROM {t} WHERE namespace = %s AND name = %s").format(
                t=_table(self._db.url.table)), [self.namespace, name]).fetchone()
            return bytes(row[0]) if row else None
        return self._db.run(run, what=f"read {name}")

    def write(self, name: str, data: bytes | str) -> None:
        body = data.encode("utf-8") if isinstance(data, str) else bytes(data)

        def run(conn):
            ensure(conn, self._db.url.table)
            conn.execute(sql.SQL("""INSERT INTO {t} (namespace, name, body, written) VALUES (%s, %s, %s, now())
                ON CONFLICT (namespace, name) DO UPDATE SET body = EXCLUDED.body, written = now()""").format(
                t=_table(self._db.url.table)), [self.namespace, name, body])
        self._db.run(run, what=f"write {name}")

    def stamp(self) -> str:
        def run(conn):
            if conn.execute("SELECT to_regclass(%s) IS NULL", [self._db.url.table + "_state"]).fetchone()[0]:
                return ""
            row = conn.execute(sql.SQL("SELECT count(*), max(written) FROM {t} WHERE namespace = %s").format(
                t=_table(self._db.url.table)), [self.namespace]).fetchone()
            return f"{row[0]}|{row[1]}"
        return self._db.run(run, what="read the state's stamp")

    def __repr__(self) -> str:
        return f"DatabaseState({self.where!r})"


__all__ = ["DatabaseState", "ensure"]
