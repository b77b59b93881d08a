"""The knowledge base's own vocabulary: its headings, titles and key phrases, embedded.

CRAG §4.3 ("knowledge searching") rewrites a badly retrieved question into a query before
searching again. A small model asked to guess the expert terms an expert source would use
recovers few of them (15 % of the labeled terms of the adversarial rewrite rows); a list of
the terms this knowledge base actually uses, nearest to the question first, lets it pick them
instead of guessing (``KnowledgeBase.candidate_terms``, ``signatures.RewriteQuery``).

Terms, collected from the chunks at index time:

* **headings and titles**: every chunk's document title (Markdown ``#`` title, JSONL
  ``title``, file stem) and its nearest Markdown heading, except headings that are questions
  (FAQ entries are phrased like the user's question, not in the documents' words);
* **key phrases**: per chunk, the ``phrases_per_chunk`` 1–3-word phrases with the highest
  TF-IDF weight (scikit-learn ``TfidfVectorizer`` over the chunk texts, sublinear tf). Phrases
  never cross punctuation or a stop word (scikit-learn's English list, plus the words found in
  more than ``corpus_stop_share`` of the documents of a corpus of at least
  ``corpus_stop_min_docs`` documents, such as the product's own name in a help centre), so
  each phrase is a run of words as the text writes it; a phrase of two or three words must
  occur at least ``min_phrase_count`` times in the corpus (a one-off word run is rarely a
  term).

Terms are deduplicated case-insensitively and across plural forms (the first form seen is
kept: headings and titles first). Each term's vector is the embedding of the term (same
embedder as the chunks) plus ``context_weight`` times the mean vector of the chunks it was
collected from, L2-normalised: a bare term such as "idempotency key" says little to a small
embedder, its passage says what it means.

Saved beside the index (:mod:`program.retrieval.vocabulary_files`), with each term's own
embedding, which lets the next build of a changed corpus embed only its new terms (``known``).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

FORMAT_VERSION = 1  # bump when the term rules change: saved vocabularies of another version are rebuilt

#: parameters of :func:`build_vocabulary` (saved with the vocabulary; a change rebuilds it)
DEFAULT_PARAMS = {
    "phrases_per_chunk": 4,
    "max_ngram": 3,
    "min_phrase_count": 2,
    "corpus_stop_share": 0.8,
    "corpus_stop_min_docs": 10,
    "context_weight": 1.0,
}

_TOKEN = re.compile(r"[a-z0-9]+(?:[-_.'’][a-z0-9]+)*")
_POSSESSIVE = re.compile(r"['’]s$")
_JOINERS = "*`_ \t\r\n"  # Markdown emphasis and whitespace do not break a phrase


@dataclass
class Vocabulary:
    """Terms of a knowledge base and their vectors.

    Attributes:
        terms: the terms, headings and titles first, then key phrases in chunk order.
        kinds: ``"title"``, ``"heading"`` or ``"phrase"``, one per term.
        vectors: float32 array of shape ``(len(terms), dimensions)``, rows of L2 norm 1.
        params: the parameters it was built with (``DEFAULT_PARAMS`` keys).
        term_vectors: each term's own embedding, same shape as ``vectors`` (before its passages
            are mixed in), or None (a vocabulary saved before they were kept).
    """

    terms: list[str]
    kinds: list[str]
    vectors: np.ndarray
    params: dict = field(default_factory=lambda: dict(DEFAULT_PARAMS))
    term_vectors: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.terms)

    def known(self) -> dict[str, np.ndarray]:
        """Term -> its own embedding, for :func:`build_vocabulary` to skip (``{}`` without them)."""
        if self.term_vectors is None:
            return {}
        return dict(zip(self.terms, self.term_vectors))

    def nearest(self, query_vector: np.ndarray, n: int = 12) -> list[str]:
        """The ``n`` terms of highest cosine similarity to ``query_vector`` (shape ``(d,)``,
        L2-normalised), best first; fewer when the vocabulary is smaller, [] for n <= 0."""
        if n <= 0 or not self.terms:
            return []
        scores = self.vectors @ np.asarray(query_vector, dtype=np.float32).reshape(-1)
        n = min(n, len(self.terms))
        top = np.argpartition(-scores, n - 1)[:n]
        return [self.terms[i] for i in sorted(top, key=lambda i: (-scores[i], i))]


def _norm_key(term: str) -> str:
    """Case-, space- and plural-insensitive key: ``"Webhook events"`` -> ``"webhook event"``."""
    return " ".join(re.sub(r"(?<=[a-z]{3})s$", "", w) for w in term.casefold().split())


def _runs(text: str, stop: frozenset[str]) -> list[list[str]]:
    """Runs of consecutive content words: a stop word or punctuation ends a run."""
    text = text.casefold()
    runs: list[list[str]] = [[]]
    end = 0
    for m in _TOKEN.finditer(text):
        tok = m.group()
        is_stop = len(tok) < 2 or tok in stop or _POSSESSIVE.sub("", tok) in stop
        if is_stop or text[end:m.start()].strip(_JOINERS):
            runs.append([])  # punctuation or a stop word between: a new run
        if not is_stop:
            runs[-1].append(tok)
        end = m.end()
    return [r for r in runs if r]


def _phrase_analyzer(stop: frozenset[str], max_ngram: int):
    def analyze(text: str) -> list[str]:
        out = []
        for run in _runs(text, stop):
            for i in range(len(run)):
                for n in range(1, max_ngram + 1):
                    if i + n <= len(run):
                        out.append(" ".join(run[i:i + n]))
        return out

    return analyze


def _term_collector():
    """``(terms, kinds, sources, add)``: empty lists, and ``add(term, kind, chunk)`` that records each term once."""
    terms: list[str] = []
    kinds: list[str] = []
    sources: list[list[int]] = []
    index: dict[str, int] = {}

    def add(term: str, kind: str, chunk: int) -> None:
        term = " ".join(term.split())
        key = _norm_key(term)
        if not key:
            return
        if key not in index:
            index[key] = len(terms)
            terms.append(term)
            kinds.append(kind)
            sources.append([])
        if chunk not in sources[index[key]]:
            sources[index[key]].append(chunk)

    return terms, kinds, sources, add


def _corpus_stop_words(chunks, texts: list[str], stop: frozenset[str], p: dict) -> set[str]:
    """The words in more than ``corpus_stop_share`` of the documents; none under ``corpus_stop_min_docs`` documents."""
    base = _phrase_analyzer(stop, 1)
    doc_words: dict[str, set] = {}
    for c, text in zip(chunks, texts):
        for w in base(text):
            doc_words.setdefault(w, set()).add(c.doc_id)
    n_docs = len({c.doc_id for c in chunks})
    common = set()
    if n_docs >= p["corpus_stop_min_docs"]:
        common = {w for w, docs in doc_words.items() if len(docs) > p["corpus_stop_share"] * n_docs}
    return common


def _add_top_phrases(weights, names, counts: Counter, p: dict, add) -> None:
    """``add`` each chunk's top ``phrases_per_chunk`` phrases by TF-IDF weight, rare phrases of several words
    skipped."""
    for i in range(weights.shape[0]):
        row = weights.getrow(i)
        taken = 0
        for j in row.indices[np.argsort(-row.data, kind="stable")]:
            phrase = names[j]
            if " " in phrase and counts[phrase] < p["min_phrase_count"]:
                continue
            add(phrase, "phrase", i)
            taken += 1
            if taken >= p["phrases_per_chunk"]:
                break


def extract_terms(chunks, params: dict | None = None) -> tuple[list[str], list[str], list[list[int]]]:
    """The vocabulary's terms (rules in the module docstring), without vectors.

    Args:
        chunks: ``program.retrieval.chunking.Chunk`` objects (``text``, ``title``, ``heading``, ``doc_id``).
        params: overrides of ``DEFAULT_PARAMS``.

    Returns:
        ``(terms, kinds, sources)``: ``sources[i]`` lists the indexes of the chunks term i was
        collected from.
    """
    # lazy on purpose: scikit-learn loads only when a vocabulary is built
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, TfidfVectorizer

    p = {**DEFAULT_PARAMS, **(params or {})}
    terms, kinds, sources, add = _term_collector()
    for i, c in enumerate(chunks):
        add(c.title or "", "title", i)
        if c.heading and not c.heading.rstrip().endswith("?"):
            add(c.heading, "heading", i)

    texts = [c.text or "" for c in chunks]
    common = _corpus_stop_words(chunks, texts, frozenset(ENGLISH_STOP_WORDS), p)
    analyzer = _phrase_analyzer(frozenset(ENGLISH_STOP_WORDS) | common, int(p["max_ngram"]))
    if not any(analyzer(t) for t in texts):
        return terms, kinds, sources
    vectorizer = TfidfVectorizer(analyzer=analyzer, sublinear_tf=True)
    weights = vectorizer.fit_transform(texts).tocsr()
    names = vectorizer.get_feature_names_out()
    counts = Counter(ph for t in texts for ph in analyzer(t))
    _add_top_phrases(weights, names, counts, p, add)
    return terms, kinds, sources


def build_vocabulary(chunks, chunk_vectors: np.ndarray, embedder, params: dict | None = None,
                     known: dict[str, np.ndarray] | None = None) -> Vocabulary:
    """Collect the terms of ``chunks`` and embed them.

    Args:
        chunks: the knowledge base's chunks, position i = row i of ``chunk_vectors``.
        chunk_vectors: float32 ``(len(chunks), d)``, the stored chunk vectors (never re-embedded).
        embedder: ``encode(list[str]) -> (n, d)`` L2-normalised float32 (the chunks' embedder).
        params: overrides of ``DEFAULT_PARAMS``.
        known: term -> its own embedding by the same embedder (``Vocabulary.known`` of the last
            build): those terms are not embedded again.

    Returns:
        The :class:`Vocabulary` (empty for a corpus without any term).
    """
    p = {**DEFAULT_PARAMS, **(params or {})}
    terms, kinds, sources = extract_terms(chunks, p)
    dims = chunk_vectors.shape[1] if chunk_vectors.ndim == 2 else embedder.dimensions
    if not terms:
        return Vocabulary([], [], np.zeros((0, dims), np.float32), p, np.zeros((0, dims), np.float32))
    known = {t: v for t, v in (known or {}).items() if np.shape(v) == (dims,)}
    new = [t for t in terms if t not in known]
    embedded = dict(zip(new, np.asarray(embedder.encode(new), dtype=np.float32))) if new else {}
    own = np.stack([known[t] if t in known else embedded[t] for t in terms]).astype(np.float32)
    vectors = own.copy()
    if p["context_weight"] and len(chunk_vectors):
        context = np.stack([chunk_vectors[src].mean(axis=0) for src in sources]).astype(np.float32)
        context /= np.maximum(np.linalg.norm(context, axis=1, keepdims=True), 1e-12)
        vectors = vectors + float(p["context_weight"]) * context
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return Vocabulary(terms, kinds, np.ascontiguousarray(vectors, dtype=np.float32), p, own)

