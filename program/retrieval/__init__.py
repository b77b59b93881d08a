"""Retrieval: corpus loading, chunking, embeddings and the knowledge base (faiss on disk, or
PostgreSQL + pgvector: ``KnowledgeBase.connect("postgresql://...?table=name")``).

Typical use::

    from program.retrieval import KnowledgeBase
    kb = KnowledgeBase.build("eval_sets/popqa/knowledge_base.jsonl", ".cache/indexes/popqa_kb")
    passages = kb.search("What is Henry Feilden's occupation?", k=3)   # list[Passage]
"""

from program.retrieval.chunking import Chunk, chunk_document, count_tokens
from program.retrieval.corpus import CorpusError, Document, load_documents
from program.retrieval.embedding import Embedder, EmbeddingError, get_embedder
from program.retrieval.index import IndexNotFoundError, KnowledgeBase, KnowledgeBaseError
from program.retrieval.protocol import KnowledgeBaseProtocol, open_knowledge_base

__all__ = [
    "Chunk", "chunk_document", "count_tokens",
    "CorpusError", "Document", "load_documents",
    "Embedder", "EmbeddingError", "get_embedder",
    "IndexNotFoundError", "KnowledgeBase", "KnowledgeBaseError",
    "KnowledgeBaseProtocol", "open_knowledge_base",
]
