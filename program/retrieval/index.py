"""The knowledge base: chunks of a corpus, embedded, in a faiss index saved on disk.

On-disk layout of ``index_dir``:

* ``index.faiss`` — over L2-normalised vectors (inner product = cosine): ``faiss.IndexFlatIP``
  (default, exact) or ``faiss.IndexHNSWFlat`` (approximate); see :mod:`program.retrieval.faiss_index`.
* ``chunks.jsonl`` — one :class:`Chunk` per line, row i = vector i.
* ``manifest.json`` — format version, embedding model and dimensions, chunking parameters,
  index type and parameters (``"index"``; absent in older builds, meaning flat), sha256 per
  source file, document and chunk counts, creation time (UTC ISO 8601).
* ``vocabulary.json`` + ``vocabulary.npy`` — the knowledge base's own terms (headings, titles,
  TF-IDF key phrases) and their vectors, for :meth:`KnowledgeBase.candidate_terms`; see
  :mod:`program.retrieval.vocabulary`. Built with the index; an index saved before the
  vocabulary existed (or with other vocabulary parameters) builds it from its stored chunks and
  vectors, without embedding the chunks again, the first time it is needed, and saves it.
* ``lexical/`` — the BM25 index of the chunks (:mod:`program.retrieval.lexical`), built and
  saved with the vectors (the manifest's ``"lexical"`` entry gives its parameters). An index
  saved before it existed gets it from its stored chunks on first use, with a warning line
  naming the folder, and saves it beside the rest.

``search`` is hybrid by default: the dense and the BM25 ranking fused by reciprocal rank
(:mod:`program.retrieval.fusion`); ``mode="dense"`` or ``"lexical"`` asks for one of them.

``KnowledgeBase.build`` reuses a saved index (no embedding at all) when the manifest matches the
current files, model and parameters; when only the index spec differs it re-indexes the saved
vectors (no embedding); otherwise it rebuilds. Writes go to a temporary folder
beside ``index_dir`` that is then renamed into place, so a crash never leaves a half-written
index: a writer killed between the two renames leaves the previous index beside the folder,
and the next ``load`` or ``build`` puts it back (``recover_interrupted_write``).

What gets embedded for a chunk is its title, heading (when different) and text on separate
lines; ``Chunk.text`` itself stays unprefixed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import threading
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import faiss

from program.retrieval.base import (IndexNotFoundError, KnowledgeBaseError, embed_text,  # noqa: F401 (re-exported)
                                    file_sha256)
from program.retrieval.chunking import Chunk, chunk_document, chunking_params
from program.retrieval.corpus import CorpusError, list_source_files, load_documents
from program.retrieval.embedding import Embedder, get_embedder
from program.retrieval.faiss_index import IndexSpec, apply_search_params, build_index, spec_of, stored_vectors
from program.retrieval.fusion import HYBRID, FusionParams, check_mode, rrf
from program.retrieval.interrupted import recover_interrupted_write
from program.retrieval.feedback import FEEDBACK_CHUNKS, feedback_terms
from program.retrieval.lexical import PARAMS as LEXICAL_PARAMS, LexicalIndex, tokens
from program.retrieval.mentions import mentioned_in, word_set
from program.retrieval.progress import BuildProgress
from program.retrieval.vocabulary import Vocabulary, build_vocabulary, load_vocabulary, save_vocabulary
from program.types import Passage

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
INDEX_FILE, CHUNKS_FILE, MANIFEST_FILE = "index.faiss", "chunks.jsonl", "manifest.json"




def _fingerprint(source_path: Path) -> dict[str, str]:
    files, _ = list_source_files(source_path)
    out = {}
    for f in files:
        try:
            digest = file_sha256(f)
        except OSError as exc:
            raise CorpusError(f"cannot read {f}: {exc.strerror or exc}") from None
        out[f.name if source_path.is_file() else f.relative_to(source_path).as_posix()] = digest
    return out


class KnowledgeBase:
    """Semantic search over chunks of a corpus.

    Build with :meth:`build` or open with :meth:`load`; do not call the constructor directly.

    Attributes:
        chunks: list of :class:`Chunk`, position i matches vector i.
        manifest: the manifest dict as saved.
        index_dir: folder holding the saved index.
    """

    def __init__(self, index, chunks: list[Chunk], manifest: dict, index_dir: Path,
                 embedder: Embedder | None = None, vocabulary: Vocabulary | None = None,
                 lexical: LexicalIndex | None = None):
        self._index = index
        self.chunks = chunks
        self.manifest = manifest
        self.index_dir = Path(index_dir)
        self._embedder = embedder
        self._vocabulary = vocabulary
        self._vocabulary_lock = threading.Lock()
        self._words: frozenset[str] | None = None
        self._lexical = lexical
        self._lexical_lock = threading.Lock()

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def __len__(self) -> int:
        return len(self.chunks)

    def __repr__(self) -> str:
        return f"KnowledgeBase({len(self)} chunks, {str(self.index_dir)!r})"

    # ------------------------------------------------------------------ build / load
    @classmethod
    def build(cls, source_path: str | Path, index_dir: str | Path, embedder: Embedder | None = None, *,
              target_tokens: int = 200, max_tokens: int = 300, overlap_tokens: int = 30,
              force: bool = False, index: IndexSpec | str = "flat", with_vocabulary: bool = True,
              progress: bool | None = None) -> "KnowledgeBase":
        """Chunk, embed and index the corpus at ``source_path``, saving to ``index_dir``.

        Reuses the saved index without embedding when files (sha256), embedding model and
        chunking parameters are unchanged, unless ``force``. ``index`` picks the faiss index: an
        :class:`IndexSpec`, or ``"flat"`` (default, exact) / ``"hnsw"`` with default parameters.
        If only the index spec differs from the saved one, the saved vectors are re-indexed.
        ``with_vocabulary`` (default) also collects and embeds the knowledge base's terms
        (:attr:`vocabulary`, for :meth:`candidate_terms`) and saves them with the index; False
        leaves them to be built if they are ever needed (e.g. a web-page index that is only searched).
        ``progress`` shows bars on stderr while building (files read, chunks and terms embedded, with
        rate and time left); None: when ``$CRAG_PROGRESS`` or a terminal asks (:mod:`.progress`).

        Raises:
            CorpusError: the corpus is missing, malformed or empty.
            ValueError: invalid chunking parameters or index spec.
            EmbeddingError: the embedding model cannot be loaded.
            KnowledgeBaseError: the index cannot be written (a full disk); the previous one stays.
        """
        # absolute, symlinks kept: a corpus file linked as kb.jsonl keeps its name and type
        source, index_dir = Path(os.path.abspath(source_path)), Path(index_dir).resolve()
        emb = embedder or get_embedder()
        chunking = chunking_params(target_tokens, max_tokens, overlap_tokens)
        spec = IndexSpec.coerce(index)
        files = _fingerprint(source)
        expected = {"format_version": FORMAT_VERSION, "files": files, "chunking": chunking,
                    "embedding": {"model": emb.name, "dimensions": emb.dimensions}}
        recover_interrupted_write(index_dir)
        if not force and (index_dir / MANIFEST_FILE).is_file():
            kb = cls._reuse(index_dir, emb, expected, spec)
            if kb is not None:
                return kb

        t0 = time.perf_counter()
        report: dict = {}
        bars = BuildProgress(progress)
        docs = load_documents(source, report=report, progress=bars.file_read, page_progress=bars.page_read)
        chunks = [c for d in docs for c in chunk_document(d, target_tokens, max_tokens, overlap_tokens)]
        vecs = bars.embedder(emb, "chunks").encode([embed_text(c) for c in chunks])
        if vecs.shape != (len(chunks), emb.dimensions):
            raise KnowledgeBaseError(f"embedder returned shape {vecs.shape}, "
                                     f"expected {(len(chunks), emb.dimensions)}")
        faiss_index = build_index(spec, vecs)
        vocabulary = build_vocabulary(chunks, vecs, bars.embedder(emb, "terms")) if with_vocabulary else None
        lexical = LexicalIndex.build([embed_text(c) for c in chunks])
        manifest = {**expected, "index": spec.to_manifest(), "lexical": {"library": "bm25s", **LEXICAL_PARAMS},
                    "source_path": str(source), "documents": len(docs),
                    "chunk_count": len(chunks), "skipped_files": report.get("skipped_files", []),
                    "unreadable": report.get("unreadable", []),
                    "build_seconds": round(time.perf_counter() - t0, 3),
                    "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        _write_atomic(index_dir, faiss_index, chunks, manifest, vocabulary, lexical)
        log.info("built %s index %s: %d docs, %d chunks, %s vocabulary terms in %.1fs", spec.type, index_dir,
                 len(docs), len(chunks), len(vocabulary) if vocabulary is not None else "no",
                 manifest["build_seconds"])
        return cls(faiss_index, chunks, manifest, index_dir, emb, vocabulary, lexical)

    @classmethod
    def _reuse(cls, index_dir: Path, emb: Embedder, expected: dict, spec: IndexSpec) -> "KnowledgeBase | None":
        """The saved index when ``expected`` matches its manifest (re-indexed if only ``spec`` differs); else None."""
        try:
            kb = cls.load(index_dir, embedder=emb)
            if all(kb.manifest.get(k) == v for k, v in expected.items()):
                if IndexSpec.from_manifest(kb.manifest.get("index")) == spec:
                    log.info("reusing index %s (%d chunks)", index_dir, len(kb))
                    return kb
                return kb._reindex(spec)
            log.info("index %s is stale; rebuilding", index_dir)
        except KnowledgeBaseError as exc:
            log.warning("cannot reuse index %s (%s); rebuilding", index_dir, exc)
        return None

    def _reindex(self, spec: IndexSpec) -> "KnowledgeBase":
        """A copy of this knowledge base under a new index spec, built from the saved vectors and
        saved in place (chunks, files and embedding unchanged; ``reindexed`` time added)."""
        log.info("re-indexing %s as %s (saved vectors, no embedding)", self.index_dir, spec.to_manifest())
        faiss_index = build_index(spec, stored_vectors(self._index))
        manifest = {**self.manifest, "index": spec.to_manifest(),
                    "reindexed": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        # same chunks, same vocabulary: keep the saved one (else it is built when first needed)
        vocabulary = (self._vocabulary if self._vocabulary is not None
                      else load_vocabulary(self.index_dir, _vocabulary_stamp(self.manifest)))
        lexical = self.lexical  # same chunks: the same BM25 index, saved again with them
        _write_atomic(self.index_dir, faiss_index, self.chunks, manifest, vocabulary, lexical)
        return type(self)(faiss_index, self.chunks, manifest, self.index_dir, self._embedder, vocabulary, lexical)

    @classmethod
    def connect(cls, location: str | Path, embedder: Embedder | None = None):
        """Open a knowledge base by location: a ``postgresql://user@host:port/db?table=name``
        URL gives a :class:`~program.retrieval.postgres.PgVectorKnowledgeBase`, a folder the
        saved faiss index in it (:meth:`load`).

        Raises:
            IndexNotFoundError: nothing was indexed there.
            KnowledgeBaseError: built with another embedding model, or unusable
                (``KnowledgeBaseUnavailable`` when the database cannot be reached).
            ValueError: a malformed database URL.
        """
        # the postgres package loads psycopg: only for a database location
        from program.retrieval.postgres.url import is_database_url

        if is_database_url(str(location)):
            try:
                # psycopg and the pgvector store load only for a database location
                from program.retrieval.postgres.store import PgVectorKnowledgeBase
            except ImportError as exc:
                raise KnowledgeBaseError(f"a postgresql:// knowledge base needs the postgres extra ({exc.name} is "
                                         "missing): pip install 'crag-dspy[postgres]'") from None
            return PgVectorKnowledgeBase.connect(str(location), embedder)
        return cls.load(location, embedder)

    @classmethod
    def load(cls, index_dir: str | Path, embedder: Embedder | None = None) -> "KnowledgeBase":
        """Open a saved index.

        Args:
            index_dir: folder written by :meth:`build`.
            embedder: used for queries; default :func:`get_embedder` (created lazily on first search).

        Raises:
            IndexNotFoundError: the folder or one of its three files is missing.
            KnowledgeBaseError: unreadable files, unknown format version, counts or dimensions
                that disagree, an index type other than the manifest's, or an embedder whose
                model differs from the manifest's.
        """
        index_dir = Path(index_dir)
        recover_interrupted_write(index_dir)
        missing = [n for n in (MANIFEST_FILE, INDEX_FILE, CHUNKS_FILE) if not (index_dir / n).is_file()]
        if missing:
            raise IndexNotFoundError(f"no knowledge-base index at {index_dir} (missing {', '.join(missing)}); "
                                     f"build it with KnowledgeBase.build(source, index_dir)")
        try:
            manifest = json.loads((index_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
            with open(index_dir / CHUNKS_FILE, encoding="utf-8") as f:
                chunks = [Chunk(**json.loads(line)) for line in f if line.strip()]
            index = faiss.read_index(str(index_dir / INDEX_FILE))
        except (ValueError, TypeError, RuntimeError, OSError) as exc:
            raise KnowledgeBaseError(f"corrupt index at {index_dir}: {exc}") from exc
        if manifest.get("format_version") != FORMAT_VERSION:
            raise KnowledgeBaseError(f"index at {index_dir} has format version "
                                     f"{manifest.get('format_version')!r}, expected {FORMAT_VERSION}")
        dims = manifest.get("embedding", {}).get("dimensions")
        if not (index.ntotal == len(chunks) == manifest.get("chunk_count")) or index.d != dims:
            raise KnowledgeBaseError(
                f"inconsistent index at {index_dir}: {index.ntotal} vectors of dimension {index.d}, "
                f"{len(chunks)} chunks, manifest says {manifest.get('chunk_count')} of dimension {dims}")
        try:
            spec = IndexSpec.from_manifest(manifest.get("index"))
        except (ValueError, TypeError, KeyError) as exc:
            raise KnowledgeBaseError(f"index at {index_dir} has a bad index entry in its manifest: {exc}") from exc
        if spec_of(index) != spec.type:
            raise KnowledgeBaseError(f"index at {index_dir} holds a {spec_of(index)} index, "
                                     f"manifest says {spec.type}")
        apply_search_params(index, spec)
        model = manifest["embedding"].get("model")
        if embedder is not None and (embedder.name != model or embedder.dimensions != dims):
            raise KnowledgeBaseError(f"index at {index_dir} was built with {model!r} ({dims}d), "
                                     f"not {embedder.name!r} ({embedder.dimensions}d)")
        return cls(index, chunks, manifest, index_dir, embedder)

    # ------------------------------------------------------------------ vocabulary
    @property
    def vocabulary(self) -> Vocabulary:
        """The knowledge base's terms and their vectors (:mod:`program.retrieval.vocabulary`).

        Loaded from ``vocabulary.json`` / ``vocabulary.npy`` in ``index_dir``; when they are
        missing or belong to another build (an index saved before the vocabulary existed), built
        from the stored chunks and their stored vectors (only the terms are embedded) and saved
        beside the index. A vocabulary that cannot be saved (read-only folder) is still used.
        """
        if self._vocabulary is None:
            with self._vocabulary_lock:
                if self._vocabulary is None:
                    stamp = _vocabulary_stamp(self.manifest)
                    vocabulary = load_vocabulary(self.index_dir, stamp)
                    if vocabulary is None:
                        log.info("building the vocabulary of %s from its stored chunks", self.index_dir)
                        vocabulary = build_vocabulary(self.chunks, stored_vectors(self._index), self.embedder)
                        try:
                            save_vocabulary(vocabulary, self.index_dir, stamp)
                        except OSError as exc:
                            log.warning("cannot save the vocabulary of %s: %s", self.index_dir, exc)
                    self._vocabulary = vocabulary
        return self._vocabulary

    @property
    def lexical(self) -> LexicalIndex:
        """The BM25 index of the chunks (:mod:`program.retrieval.lexical`), loaded from
        ``lexical/``; an index saved before it existed (or with other BM25 parameters) builds it
        from its stored chunks (no embedding; seconds for thousands of chunks), says so in one
        warning line and saves it beside the index (a read-only folder: used unsaved)."""
        if self._lexical is None:
            with self._lexical_lock:
                if self._lexical is None:
                    stamp = _vocabulary_stamp(self.manifest)
                    lexical = LexicalIndex.load(self.index_dir, stamp)
                    if lexical is None:
                        log.warning("index %s has no lexical index (built before hybrid search): building it "
                                    "from its %d stored chunks", self.index_dir, len(self.chunks))
                        lexical = LexicalIndex.build([embed_text(c) for c in self.chunks])
                        try:
                            lexical.save(self.index_dir, stamp)
                        except OSError as exc:
                            log.warning("cannot save the lexical index of %s: %s", self.index_dir, exc)
                    self._lexical = lexical
        return self._lexical

    def candidate_terms(self, question: str, n: int = 12) -> list[str]:
        """The knowledge base's own terms nearest to ``question``, for the query rewrite.

        CRAG §4.3 ("knowledge searching"): a badly retrieved question is rewritten into a
        query in the documents' words and searched again. Instead of leaving the rewriter to
        guess the expert terms, this offers it the terms the knowledge base uses (headings,
        titles and TF-IDF key phrases of its chunks, :mod:`program.retrieval.vocabulary`),
        ranked by cosine similarity between the question's embedding (shape ``(d,)``, d = 384
        for all-MiniLM-L6-v2) and the ``(n_terms, d)`` term vectors.

        Args:
            question: the user's question.
            n: how many terms to return.

        Returns:
            Up to ``n`` terms (str), nearest first; ``[]`` for a blank question, ``n <= 0`` or a
            knowledge base without terms.
        """
        if not question or not question.strip() or n <= 0:
            return []
        vocabulary = self.vocabulary
        if not len(vocabulary):
            return []
        return vocabulary.nearest(self.embedder.encode([question])[0], n)

    def mentions(self, terms) -> set[str]:
        """The ``terms`` (lower-cased words) that some chunk's text or title holds, in either
        number (:mod:`program.retrieval.mentions`); the word set is built once, on first use."""
        if self._words is None:
            self._words = word_set(f"{c.title} {c.text}" for c in self.chunks)
        return mentioned_in(self._words, terms)

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int = 3, mode: str = "hybrid", fusion: FusionParams = HYBRID) -> list[Passage]:
        """Top-``k`` chunks for ``query``, best first.

        Args:
            mode: ``"hybrid"`` (default): the cosine ranking and the BM25 ranking (``fusion.depth``
                candidates each) fused by reciprocal rank (:mod:`program.retrieval.fusion`);
                ``"dense"``: cosine similarity alone; ``"lexical"``: BM25 alone.
            fusion: the fusion's rank constant, weights and depth.

        Returns:
            Passages with ``id`` = chunk id, ``source="kb"``, ``score`` = cosine in [-1, 1] of the
            chunk to the query whatever the mode (the judges read it), ``url`` = document URL or
            else its source file path. ``[]`` for a blank query or k <= 0.

        Raises:
            ValueError: an unknown mode.
        """
        return self.search_batch([query], k, mode, fusion)[0]

    def search_batch(self, queries: list[str], k: int = 3, mode: str = "hybrid",
                     fusion: FusionParams = HYBRID) -> list[list[Passage]]:
        """:meth:`search` for many queries with one embedding pass; one list per query."""
        check_mode(mode)
        out: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q and q.strip()]
        k = min(k, len(self.chunks))
        if not live or k <= 0:
            return out
        vecs = self.embedder.encode([queries[i] for i in live])
        depth = min(len(self.chunks), k if mode == "dense" else max(k, fusion.depth))
        scores, ids = self._index.search(vecs, depth) if mode != "lexical" else (None, None)
        for row, qi in enumerate(live):
            dense = {} if ids is None else {int(i): float(s) for s, i in zip(scores[row], ids[row]) if i >= 0}
            if mode == "dense":
                order = list(dense)
            else:
                top = list(dense)[:FEEDBACK_CHUNKS]
                lexical = [i for i, _ in self.lexical.search_tokens(
                    self.lexical_query(queries[qi], top, fusion.feedback), depth)]
                order = lexical if mode == "lexical" else [
                    i for i, _ in rrf([list(dense), lexical], [fusion.dense, fusion.lexical], fusion.k)]
            out[qi] = [self._passage(i, dense.get(i), vecs[row]) for i in order[:k]]
        return out

    def lexical_query(self, query: str, top: list[int], feedback: int) -> list[str]:
        """The BM25 query of hybrid search: ``query``'s tokens, plus ``feedback`` feedback terms
        of the chunks at positions ``top`` (the first dense results; :mod:`program.retrieval.feedback`)."""
        asked = tokens(query)
        if not feedback or not top:
            return asked
        lexical = self.lexical
        return asked + feedback_terms(asked, [tokens(embed_text(self.chunks[i])) for i in top], lexical.df,
                                      len(lexical), feedback)

    def _passage(self, position: int, cosine: float | None, query_vector) -> Passage:
        """Chunk ``position`` as a Passage scored by its cosine to ``query_vector`` (computed from
        the stored vector when the dense search did not return it)."""
        if cosine is None:
            cosine = float(self._index.reconstruct(position) @ query_vector)
        c = self.chunks[position]
        return Passage(id=c.chunk_id, text=c.text, source="kb", title=c.title, url=c.url or c.source_path,
                       score=cosine, page=c.page)


def _vocabulary_stamp(manifest: dict) -> dict:
    """What ties a saved vocabulary to its index: model, dimensions, chunk count, build time."""
    embedding = manifest.get("embedding") or {}
    return {"model": embedding.get("model"), "dimensions": embedding.get("dimensions"),
            "chunk_count": manifest.get("chunk_count"), "created": manifest.get("created")}


def _write_files(folder: Path, index, chunks: list[Chunk], manifest: dict, vocabulary: Vocabulary | None,
                 lexical: LexicalIndex | None = None) -> None:
    """Write and sync the index's files into ``folder``. Raises OSError or faiss's RuntimeError."""
    faiss.write_index(index, str(folder / INDEX_FILE))
    with open(folder / CHUNKS_FILE, "w", encoding="utf-8") as f:
        for c in chunks:
            f.write(json.dumps(asdict(c), ensure_ascii=False) + "\n")
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, ensure_ascii=False), encoding="utf-8")
    if vocabulary is not None:
        save_vocabulary(vocabulary, folder, _vocabulary_stamp(manifest))
    if lexical is not None:
        lexical.save(folder, _vocabulary_stamp(manifest))
    for name in (INDEX_FILE, CHUNKS_FILE, MANIFEST_FILE):
        with open(folder / name, "rb") as f:
            os.fsync(f.fileno())


def _write_atomic(index_dir: Path, index, chunks: list[Chunk], manifest: dict,
                  vocabulary: Vocabulary | None = None, lexical: LexicalIndex | None = None) -> None:
    """Write the three files (and the vocabulary's two and the lexical index, when given) into a temp folder beside
    ``index_dir``, then swap it into place. A kill leaves the previous index, or (between the two
    renames) the previous index beside it, which :func:`recover_interrupted_write` puts back.
    Raises ``KnowledgeBaseError`` (one line: a full disk, a read-only folder) with the previous
    index untouched."""
    try:
        index_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{index_dir.name}.tmp-{os.getpid()}-", dir=index_dir.parent))
    except OSError as exc:
        raise KnowledgeBaseError(f"cannot write the index into {index_dir}: {exc.strerror or exc}") from None
    try:
        _write_files(tmp, index, chunks, manifest, vocabulary, lexical)
    except (OSError, RuntimeError) as exc:  # faiss reports a failed write (a full disk) as RuntimeError
        shutil.rmtree(tmp, ignore_errors=True)
        # faiss: "... write error in PATH: 16339 != 29184 (No space left on device)"
        found = re.search(r"\(([^()]+)\)\s*$", str(exc))
        reason = getattr(exc, "strerror", None) or (found.group(1) if found else str(exc).strip().splitlines()[-1])
        raise KnowledgeBaseError(f"cannot write the index into {index_dir}: {reason}; "
                                 "the previous index is unchanged") from None
    try:
        old = None
        if index_dir.exists():
            old = index_dir.parent / f".{index_dir.name}.old-{os.getpid()}-{time.time_ns()}"
            os.replace(index_dir, old)
        try:
            os.replace(tmp, index_dir)
        except OSError:  # another process put an index in place meanwhile: keep theirs
            log.warning("index %s appeared during build; keeping the other writer's copy", index_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
