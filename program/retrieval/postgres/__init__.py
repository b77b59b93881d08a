"""The PostgreSQL + pgvector knowledge-base backend (see :mod:`program.retrieval.postgres.store`).

Needs the ``postgres`` extra (``pip install 'crag-dspy[postgres]'``: psycopg, psycopg-pool,
pgvector). ``url`` needs none of it, so a command can tell a database URL from a path without
them; the rest is imported when first named.
"""

from program.retrieval.postgres.url import DatabaseURL, is_database_url

__all__ = ["DatabaseURL", "KnowledgeBaseUnavailable", "PgVectorKnowledgeBase", "is_database_url"]


def __getattr__(name: str):
    if name == "KnowledgeBaseUnavailable":
        # lazy on purpose: psycopg and pgvector are an extra
        from program.retrieval.postgres.connection import KnowledgeBaseUnavailable

        return KnowledgeBaseUnavailable
    if name == "PgVectorKnowledgeBase":
        # lazy on purpose: psycopg and pgvector are an extra
        from program.retrieval.postgres.store import PgVectorKnowledgeBase

        return PgVectorKnowledgeBase
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
