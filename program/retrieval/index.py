"""The knowledge base: chunks of a corpus, embedded, in a faiss index saved on disk.

On-disk layout of ``index_dir``:

* ``index.faiss`` — over L2-normalised vectors (inner product = cosine): ``faiss.IndexFlatIP``
  (default, exact) or ``faiss.IndexHNSWFlat`` (approximate); see :mod:`program.retrieval.faiss_index`.
* ``chunks.jsonl`` — one :class:`Chunk` per line, row i = vector i.
* ``manifest.json`` — format version, embedding model and dimensions, chunking parameters,
  index type and parameters (``"index"``; absent in older builds, meaning flat), sha256 per
  source file, chunks per file (``file_chunks``), document and chunk counts, what the build
  changed (``changes``), creation time (UTC ISO 8601).
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
vectors (no embedding); when files were added, changed or removed it reads and embeds only those
(:mod:`program.retrieval.building`); another model or chunking rebuilds everything. Writes go to
a temporary folder beside ``index_dir`` that is then renamed into place
(:mod:`program.retrieval.index_files`), so a crash never leaves a half-written index.

What gets embedded for a chunk is its title, heading (when different) and text on separate
lines; ``Chunk.text`` itself stays unprefixed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from datetime import datetime, timezone
from pathlib import Path

import faiss
import numpy as np

from program.paths import state_root
from program.retrieval.base import (IndexNotFoundError, KnowledgeBaseError, embed_text,  # noqa: F401 (re-exported)
                                    file_sha256, modified_times)
from program.retrieval.changes import FILE_CHUNKS, FILE_MODIFIED
from program.retrieval.chunking import Chunk
from program.retrieval.embedder_choice import embedding_mismatch, knowledge_base_embedder
from program.retrieval.embedding import Embedder
from program.retrieval.faiss_index import IndexSpec, apply_search_params, build_index, spec_of, stored_vectors
from program.retrieval.fusion import HYBRID, FusionParams, check_mode, rrf
from program.retrieval.index_files import (CHUNKS_FILE, FORMAT_VERSION, INDEX_FILE, MANIFEST_FILE,
                                           vocabulary_stamp, write_atomic)
from program.retrieval.interrupted import recover_interrupted_write
from program.retrieval.feedback import FEEDBACK_CHUNKS, feedback_terms
from program.retrieval.filters import DocumentFilter, Within, file_time, select
from program.retrieval.lexical import LexicalIndex, tokens
from program.retrieval.mentions import mentioned_in, word_set
from program.retrieval.vocabulary import Vocabulary, build_vocabulary
from program.retrieval.vocabulary_files import load_vocabulary, save_vocabulary
from program.state import FolderState
from program.types import Passage

log = logging.getLogger(__name__)
_write_atomic = write_atomic  # the name the kill tests drive


class KeptChunks:
    """The chunks a restriction keeps: a boolean ``mask`` over chunk positions, the positions, and
    a faiss ``IDSelectorBitmap`` over them (it reads ``bits``, which this object keeps alive)."""

    def __init__(self, mask: np.ndarray):
        self.mask = mask
        self.positions = np.flatnonzero(mask)
        self.count = int(len(self.positions))
        self.bits = np.packbits(mask, bitorder="little")
        self.selector = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(self.bits))
        self.words: frozenset[str] | None = None  # the kept chunks' word set, built when first asked


def _fingerprint(source_path: Path) -> dict[str, str]:
    """Corpus file -> sha256 (``program.retrieval.building.fingerprint``)."""
    # lazy on purpose: the corpus listing loads only to build
    from program.retrieval.building import fingerprint

    return fingerprint(Path(source_path))


class KnowledgeBase:
    """Semantic search over chunks of a corpus.

    Build with :meth:`build` or open with :meth:`load`; do not call the constructor directly.

    Attributes:
        chunks: list of :class:`Chunk`, position i matches vector i.
        manifest: the manifest dict as saved.
        index_dir: folder holding the saved index.
        changes: what :meth:`build` changed (``CorpusChanges``); None for a loaded index.
    """

    def __init__(self, index, chunks: list[Chunk], manifest: dict, index_dir: Path,
                 embedder: Embedder | None = None, vocabulary: Vocabulary | None = None,
                 lexical: LexicalIndex | None = None, changes=None):
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
        self._file_dates: dict | None = None
        self._kept: dict[Within, KeptChunks] = {}  # restrictions searched lately, oldest first
        self._kept_lock = threading.Lock()
        self.changes = changes  # what the build that returned it changed (``program.retrieval.changes``)

    @property
    def embedder(self) -> Embedder:
        """What embeds queries: the one given when built or loaded, else the process's knowledge-base
        embedder (``--embedder``, ``CRAG_EMBEDDER``, else all-MiniLM-L6-v2).

        Raises:
            KnowledgeBaseError: that embedder is not the one that built the index (one line)."""
        if self._embedder is None:
            emb = knowledge_base_embedder()
            if why := embedding_mismatch(self.manifest.get("embedding"), emb):
                raise KnowledgeBaseError(f"index at {self.index_dir} was {why}: its questions must be embedded as its "
                                         "chunks were (--embedder, CRAG_EMBEDDER)")
            self._embedder = emb
        return self._embedder

    def __len__(self) -> int:
        return len(self.chunks)

    def __repr__(self) -> str:
        return f"KnowledgeBase({len(self)} chunks, {str(self.index_dir)!r})"

    # ------------------------------------------------------------------ what follows the knowledge base
    def state(self, namespace: str) -> FolderState:
        """What is learned about this knowledge base for ``namespace`` (a compile): a folder of
        the state folder keyed by where the index lives, ``<state>/knowledge-bases/<index folder
        name>-<hash of its path>/<namespace>`` (``program.paths.state_root``), so that it follows
        the knowledge base from one build to the next."""
        digest = hashlib.sha256(str(self.index_dir.resolve()).encode()).hexdigest()[:10]
        return FolderState(state_root() / "knowledge-bases" / f"{self.index_dir.name}-{digest}" / namespace)

    @property
    def build_id(self) -> str:
        """This build's identity: its manifest's creation time (microseconds)."""
        return str(self.manifest.get("created"))

    def saved_build(self) -> str | None:
        """The identity of the build saved at ``index_dir`` now (another process may have written a
        newer one since this was loaded), or None when none is readable."""
        try:
            return str(json.loads((self.index_dir / MANIFEST_FILE).read_text(encoding="utf-8")).get("created"))
        except (OSError, ValueError):
            return None

    # ------------------------------------------------------------------ build / load
    @classmethod
    def build(cls, source_path: str | Path, index_dir: str | Path, embedder: Embedder | None = None, *,
              target_tokens: int = 200, max_tokens: int = 300, overlap_tokens: int = 30,
              force: bool = False, index: IndexSpec | str = "flat", with_vocabulary: bool = True,
              progress: bool | None = None, other_embedder: str = "rebuild") -> "KnowledgeBase":
        """Chunk, embed and index the corpus at ``source_path``, saving to ``index_dir``; on a
        saved index, only what changed (:mod:`program.retrieval.building`).

        Unchanged files (sha256) keep their chunks and vectors; added and changed ones are read
        and embedded; removed ones are dropped; ``kb.changes`` says which
        (:class:`~program.retrieval.changes.CorpusChanges`). Another embedding model or other
        chunking parameters rebuild everything, saying why; so does ``force``. ``index`` picks
        the faiss index: an :class:`IndexSpec`, or ``"flat"`` (default, exact) / ``"hnsw"`` with
        default parameters; when only it differs, the saved vectors are re-indexed.
        ``with_vocabulary`` (default) also collects and embeds the knowledge base's terms
        (:attr:`vocabulary`, for :meth:`candidate_terms`) and saves them with the index; False
        leaves them to be built if they are ever needed (e.g. a web-page index that is only searched).
        ``progress`` shows bars on stderr while building (files read, chunks and terms embedded, with
        rate and time left); None: when ``$CRAG_PROGRESS`` or a terminal asks (:mod:`.progress`).
        ``other_embedder``: what a saved index built by another embedder than ``embedder`` gets:
        ``"rebuild"`` (``index``) or ``"refuse"`` (``ask`` and ``serve``: a question must be
        embedded as the index was).

        Raises:
            CorpusError: the corpus is missing, malformed or empty.
            ValueError: invalid chunking parameters or index spec.
            EmbeddingError: the embedding model cannot be loaded.
            KnowledgeBaseError: the index cannot be written (a full disk), the previous one stays;
                or (``other_embedder="refuse"``) it was built by another embedder.
        """
        # lazy on purpose: building imports the corpus loader and its converters, which a search does not need
        from program.retrieval.building import build_knowledge_base

        return build_knowledge_base(cls, source_path, index_dir, embedder, target_tokens=target_tokens,
                                    max_tokens=max_tokens, overlap_tokens=overlap_tokens, force=force, index=index,
                                    with_vocabulary=with_vocabulary, progress=progress,
                                    other_embedder=other_embedder)

    def reused(self, embedder: Embedder, changes) -> "KnowledgeBase":
        """This knowledge base as a build that changed nothing returns it: a new one on the same
        index, chunks and files, reading queries with ``embedder``, ``changes`` set."""
        return type(self)(self._index, self.chunks, self.manifest, self.index_dir, embedder, self._vocabulary,
                          self._lexical, changes)

    def _reindex(self, spec: IndexSpec, changes=None) -> "KnowledgeBase":
        """A copy of this knowledge base under a new index spec, built from the saved vectors and
        saved in place (chunks, files and embedding unchanged; ``reindexed`` time added)."""
        log.info("re-indexing %s as %s (saved vectors, no embedding)", self.index_dir, spec.to_manifest())
        faiss_index = build_index(spec, stored_vectors(self._index))
        manifest = {**self.manifest, "index": spec.to_manifest(),
                    "reindexed": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        # same chunks, same vocabulary: keep the saved one (else it is built when first needed)
        vocabulary = (self._vocabulary if self._vocabulary is not None
                      else load_vocabulary(self.index_dir, vocabulary_stamp(self.manifest)))
        lexical = self.lexical  # same chunks: the same BM25 index, saved again with them
        write_atomic(self.index_dir, faiss_index, self.chunks, manifest, vocabulary, lexical)
        return type(self)(faiss_index, self.chunks, manifest, self.index_dir, self._embedder, vocabulary, lexical,
                          changes)

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
            embedder: used for queries; default the process's knowledge-base embedder (``embedder``), created lazily.

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
                    stamp = vocabulary_stamp(self.manifest)
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
                    stamp = vocabulary_stamp(self.manifest)
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

    def mentions(self, terms, *, within: Within | None = None) -> set[str]:
        """The ``terms`` (lower-cased words) that some chunk's text or title holds (only chunks
        ``within``, when given), in either number (:mod:`program.retrieval.mentions`); each word
        set is built once, on first use."""
        kept = self.kept(within)
        if kept is None:
            if self._words is None:
                self._words = word_set(f"{c.title} {c.text}" for c in self.chunks)
            return mentioned_in(self._words, terms)
        if kept.words is None:
            kept.words = word_set(f"{self.chunks[i].title} {self.chunks[i].text}" for i in kept.positions)
        return mentioned_in(kept.words, terms)

    def count_within(self, within: Within | None) -> int:
        """How many chunks ``within`` keeps (all of them for None)."""
        kept = self.kept(within)
        return len(self.chunks) if kept is None else kept.count

    def chunks_within(self, within: Within | None) -> list[Chunk]:
        """The chunks ``within`` keeps, in chunk order (all of them for None)."""
        kept = self.kept(within)
        return self.chunks if kept is None else [self.chunks[i] for i in kept.positions]

    # ------------------------------------------------------------------ search
    def search(self, query: str, k: int = 3, mode: str = "hybrid", fusion: FusionParams = HYBRID, *,
               within: Within | None = None) -> list[Passage]:
        """Top-``k`` chunks for ``query``, best first.

        Args:
            mode: ``"hybrid"`` (default): the cosine ranking and the BM25 ranking (``fusion.depth``
                candidates each) fused by reciprocal rank (:mod:`program.retrieval.fusion`);
                ``"dense"``: cosine similarity alone; ``"lexical"``: BM25 alone.
            fusion: the fusion's rank constant, weights and depth.
            within: only chunks of these corpus files and pages (:mod:`program.retrieval.filters`),
                filtered inside both rankings: faiss searches with an ID selector over the kept
                chunks (exact, over the stored vectors, for HNSW too), BM25 scores only them.

        Returns:
            Passages with ``id`` = chunk id, ``source="kb"``, ``score`` = cosine in [-1, 1] of the
            chunk to the query whatever the mode (the judges read it), ``url`` = document URL or
            else its source file path. ``[]`` for a blank query, k <= 0 or nothing ``within``.

        Raises:
            ValueError: an unknown mode.
        """
        return self.search_batch([query], k, mode, fusion, within=within)[0]

    def search_batch(self, queries: list[str], k: int = 3, mode: str = "hybrid",
                     fusion: FusionParams = HYBRID, *, within: Within | None = None) -> list[list[Passage]]:
        """:meth:`search` for many queries with one embedding pass; one list per query."""
        check_mode(mode)
        out: list[list[Passage]] = [[] for _ in queries]
        live = [i for i, q in enumerate(queries) if q and q.strip()]
        kept = self.kept(within)
        size = len(self.chunks) if kept is None else kept.count
        k = min(k, size)
        if not live or k <= 0:
            return out
        vecs = self.embedder.encode([queries[i] for i in live])
        depth = min(size, k if mode == "dense" else max(k, fusion.depth))
        scores, ids = self._dense(vecs, depth, kept) if mode != "lexical" else (None, None)
        for row, qi in enumerate(live):
            dense = {} if ids is None else {int(i): float(s) for s, i in zip(scores[row], ids[row]) if i >= 0}
            if mode == "dense":
                order = list(dense)
            else:
                top = list(dense)[:FEEDBACK_CHUNKS]
                lexical = [i for i, _ in self.lexical.search_tokens(
                    self.lexical_query(queries[qi], top, fusion.feedback), depth,
                    allowed=None if kept is None else kept.mask)]
                order = lexical if mode == "lexical" else [
                    i for i, _ in rrf([list(dense), lexical], [fusion.dense, fusion.lexical], fusion.k)]
            out[qi] = [self._passage(i, dense.get(i), vecs[row]) for i in order[:k]]
        return out

    def _dense(self, vecs, depth: int, kept: "KeptChunks | None"):
        """faiss's ``(scores, ids)`` of the ``depth`` nearest chunks, among ``kept`` when given
        (an ID selector over the flat vectors: exact whatever the index type)."""
        if kept is None:
            return self._index.search(vecs, depth)
        flat = self._index if isinstance(self._index, faiss.IndexFlat) else faiss.downcast_index(self._index.storage)
        return flat.search(vecs, depth, params=faiss.SearchParameters(sel=kept.selector))

    # ------------------------------------------------------------------ filters
    def file_dates(self) -> dict[str, datetime | None]:
        """Corpus file -> its modification time when indexed (the manifest's ``file_modified``;
        for an index built before it was recorded, the file's time now, when it can be read)."""
        if self._file_dates is None:
            recorded = self.manifest.get(FILE_MODIFIED)
            if recorded is None:
                source = Path(str(self.manifest.get("source_path") or ""))
                recorded = modified_times(source, self.manifest.get("files") or {}) if source.name else {}
            self._file_dates = {name: file_time(recorded.get(name)) for name in self.manifest.get("files") or {}}
        return self._file_dates

    def select(self, flt: DocumentFilter | None) -> Within:
        """What ``flt`` leaves of this knowledge base (``program.retrieval.filters.select``)."""
        return select(flt, self.file_dates())

    def kept(self, within: Within | None) -> "KeptChunks | None":
        """The chunk positions ``within`` keeps, with their faiss selector (cached per restriction);
        None for no restriction."""
        if within is None or (within.files is None and within.pages is None):
            return None
        with self._kept_lock:
            if within not in self._kept:
                ranges, start = {}, 0
                for name, count in (self.manifest.get(FILE_CHUNKS) or {}).items():
                    ranges[name] = (start, start + count)
                    start += count
                mask = np.zeros(len(self.chunks), dtype=bool)
                for name in ranges if within.files is None else within.files:
                    lo, hi = ranges.get(name, (0, 0))
                    mask[lo:hi] = True
                if within.pages is not None:
                    pages = np.fromiter((c.page for c in self.chunks), dtype=np.int64, count=len(self.chunks))
                    mask &= (pages >= within.pages[0]) & (pages <= within.pages[1])
                if len(self._kept) >= 32:
                    self._kept.pop(next(iter(self._kept)))
                self._kept[within] = KeptChunks(mask)
            return self._kept[within]

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
