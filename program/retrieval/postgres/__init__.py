"""The PostgreSQL + pgvector knowledge-base backend (see :mod:`program.retrieval.postgres.store`)."""

from program.retrieval.postgres.connection import KnowledgeBaseUnavailable
from program.retrieval.postgres.store import PgVectorKnowledgeBase
from program.retrieval.postgres.url import DatabaseURL, is_database_url

__all__ = ["DatabaseURL", "KnowledgeBaseUnavailable", "PgVectorKnowledgeBase", "is_database_url"]
