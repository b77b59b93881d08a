"""The knowledge base's lexical index: BM25 over its chunks, with the ``bm25s`` library.

A 384-dimension sentence vector blurs the documents' exact terms (a flag, an error code, a
setting's name); a lexical index finds them. BM25 (Robertson and Zaragoza 2009, "The
Probabilistic Relevance Framework: BM25 and Beyond"), Lucene's variant as ``bm25s`` computes it
(Lù 2024, "BM25S: Orders of magnitude faster lexical search via eager sparse scoring"):
``sum over query terms t of idf(t) * tf / (tf + k1 * (1 - b + b * len / avglen))`` with
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``.

Tokens follow PostgreSQL's ``english`` text-search configuration in its plain-word rules:
lower-cased runs of letters and digits, a hyphenated word kept whole and as its parts,
Snowball's English stop words dropped, the rest stemmed by the Snowball English stemmer
(PyStemmer). The pgvector knowledge base writes its postings from these same tokens
(:mod:`program.retrieval.postgres.postings`), so both backends rank alike.

The text indexed for a chunk is the one embedded (``base.embed_text``: title, heading, text).
Saved beside the index in ``lexical/`` (``bm25s``'s own files plus ``lexical.json``: format,
parameters and the stamp of the index it belongs to), written to a temporary folder and
swapped into place; a folder that does not match its stamp is ignored (and rebuilt).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
LEXICAL_DIR, LEXICAL_JSON = "lexical", "lexical.json"
#: BM25 parameters (saved with the index; a change rebuilds it); the pgvector backend uses the same
PARAMS = {"method": "lucene", "k1": 1.2, "b": 0.75, "tokens": "postgresql-english"}

# PostgreSQL's tsearch_data/english.stop (Snowball's English list)
STOP_WORDS = frozenset("""i me my myself we our ours ourselves you your yours yourself yourselves he him his
himself she her hers herself it its itself they them their theirs themselves what which who whom this that these
those am is are was were be been being have has had having do does did doing a an the and but if or because as
until while of at by for with about against between into through during before after above below to from up down
in out on off over under again further then once here there when where why how all any both each few more most
other some such no nor not only own same so than too very s t can will just don should now""".split())

_WORD = re.compile(r"[^\W_]+(?:-[^\W_]+)*")
_NO_TERM = "\x00"  # never a token: ``tokens`` yields word characters only
_stemmer = None


def tokens(text: str) -> list[str]:
    """The BM25 tokens of ``text`` (rules in the module docstring): ``"Dry-run the Pods"`` ->
    ``["dry-run", "dri", "run", "pod"]``."""
    global _stemmer
    if _stemmer is None:
        import Stemmer  # PyStemmer: the Snowball stemmers PostgreSQL's english_stem uses

        _stemmer = Stemmer.Stemmer("english")
    words = []
    for match in _WORD.finditer(text.casefold()):
        word = match.group()
        words.append(word)
        if "-" in word:
            words.extend(word.split("-"))
    return _stemmer.stemWords([w for w in words if w not in STOP_WORDS])


class LexicalIndex:
    """BM25 over ``n`` chunk texts, row i = chunk i.

    Build with :meth:`build`, open with :meth:`load`; :meth:`search` ranks chunk positions.
    """

    def __init__(self, bm25, size: int, params: dict):
        self._bm25, self.size, self.params = bm25, size, params

    def __len__(self) -> int:
        return self.size

    @classmethod
    def build(cls, texts: list[str]) -> "LexicalIndex":
        """Tokenize and index ``texts`` (one per chunk, in chunk order)."""
        import bm25s  # lazy: loads only when a lexical index is built or opened

        bm25 = bm25s.BM25(method=PARAMS["method"], k1=PARAMS["k1"], b=PARAMS["b"])
        corpus = [tokens(t) for t in texts]
        if not any(corpus):  # bm25s cannot index an empty vocabulary: a term no query holds keeps it valid
            corpus = [[_NO_TERM] for _ in corpus]
        bm25.index(corpus, show_progress=False)
        return cls(bm25, len(texts), dict(PARAMS))

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """The ``k`` chunk positions of highest BM25 score for ``query``, best first, as
        ``(position, score)``; chunks scoring 0 (no query term) are left out; ties go to the
        earlier chunk. ``[]`` for a query without a known term or ``k <= 0``."""
        return self.search_tokens(tokens(query), k)

    def search_tokens(self, query_tokens: list[str], k: int,
                      allowed: np.ndarray | None = None) -> list[tuple[int, float]]:
        """:meth:`search` for a query already tokenized (each distinct token counted once);
        ``allowed``: a boolean mask over chunk positions, the only chunks ranked (a filter)."""
        vocab = self._bm25.vocab_dict
        wanted = list(dict.fromkeys(t for t in query_tokens if t in vocab))
        if not wanted or k <= 0 or not self.size:
            return []
        scores = np.asarray(self._bm25.get_scores(wanted), dtype=np.float64)[:self.size]
        if allowed is not None:
            scores = np.where(allowed[:self.size], scores, 0.0)
        hits = np.flatnonzero(scores > 0)
        order = hits[np.lexsort((hits, -scores[hits]))][:k]
        return [(int(i), float(scores[i])) for i in order]

    def df(self, token: str) -> int:
        """The number of chunks holding ``token`` (0 for a token the index does not know)."""
        position = self._bm25.vocab_dict.get(token)
        indptr = self._bm25.scores["indptr"]
        return 0 if position is None or position + 1 >= len(indptr) else int(indptr[position + 1] - indptr[position])

    def save(self, folder: str | Path, stamp: dict) -> None:
        """Write ``folder/lexical/`` through a temporary folder swapped into place (a kill leaves
        the previous one or none, never half of one). Raises OSError."""
        folder = Path(folder)
        tmp = Path(tempfile.mkdtemp(prefix=f".{LEXICAL_DIR}.tmp-{os.getpid()}-", dir=folder))
        try:
            self._bm25.save(str(tmp), show_progress=False)
            record = {"format_version": FORMAT_VERSION, "params": self.params, "stamp": stamp, "size": self.size}
            (tmp / LEXICAL_JSON).write_text(json.dumps(record), encoding="utf-8")
            for f in tmp.iterdir():
                with open(f, "rb") as fh:
                    os.fsync(fh.fileno())
            final, old = folder / LEXICAL_DIR, folder / f".{LEXICAL_DIR}.old-{os.getpid()}-{time.time_ns()}"
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, folder: str | Path, stamp: dict) -> "LexicalIndex | None":
        """The index saved in ``folder/lexical/``, or None when it is missing, unreadable, or
        belongs to another index (``stamp``) or other parameters."""
        import bm25s  # lazy, as in build

        where = Path(folder) / LEXICAL_DIR
        try:
            record = json.loads((where / LEXICAL_JSON).read_text(encoding="utf-8"))
            if (record.get("format_version"), record.get("params"), record.get("stamp")) != \
                    (FORMAT_VERSION, PARAMS, stamp):
                return None
            bm25 = bm25s.BM25.load(str(where), show_progress=False, verbosity=0)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return cls(bm25, int(record["size"]), dict(PARAMS))
