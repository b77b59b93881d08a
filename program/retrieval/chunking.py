"""Split documents into retrieval chunks.

Strategy, in order:

1. Split the text into sections at Markdown heading lines (``#`` … ``######``, outside code
   fences). A chunk never spans two sections; the section's heading is kept in
   ``Chunk.heading`` and is not part of ``Chunk.text``.
2. Split each section into paragraphs at blank lines.
3. Pack whole paragraphs into a chunk up to ``target_tokens``. A paragraph longer than
   ``max_tokens`` is split into sentences (and a sentence longer than ``max_tokens`` into
   word windows), which are packed the same way.
4. A ``<!-- page N -->`` line (a converted PDF's, ``program.retrieval.formats.pdf``) is not text:
   it sets the page of the paragraphs after it, and a chunk's ``page`` is that of its first
   paragraph that is not overlap (sections run across pages).
5. Each chunk after the first in a section starts with ~``overlap_tokens`` of the previous
   chunk's tail (whole trailing sentences when they fit, else trailing words).

Token counts are APPROXIMATE: ``ceil(whitespace words × 1.3)``, a common rule of thumb for
English text under WordPiece/BPE tokenizers. No tokenizer is loaded. (all-MiniLM-L6-v2
truncates input at 256 word pieces, so the 300-token default stays near that limit.)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from program.text import SPLITTER_VERSION, sentences

TOKENS_PER_WORD = 1.3

_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
PAGE_MARK = re.compile(r"^<!-- page (\d+) -->$")


@dataclass
class Chunk:
    """One retrievable piece of a document.

    Attributes:
        chunk_id: ``f"{doc_id}#{n}"``, n counting from 0 within the document.
        doc_id: id of the source document.
        text: chunk text (paragraphs separated by blank lines; nothing prefixed).
        title: the document's title.
        url: the document's URL, may be empty.
        heading: nearest Markdown heading above the chunk, "" if none.
        source_path: file the document came from, may be empty.
        page: the 1-based PDF page the chunk starts on; 0 for a document without pages.
    """

    chunk_id: str
    doc_id: str
    text: str
    title: str = ""
    url: str = ""
    heading: str = ""
    source_path: str = ""
    page: int = 0

    @property
    def where(self) -> str:
        """How a citation names the chunk's source: ``"report.pdf p. 14"``, else the document id."""
        return f"{self.doc_id} p. {self.page}" if self.page else self.doc_id


def count_tokens(text: str) -> int:
    """Approximate token count: ``ceil(len(text.split()) * 1.3)``."""
    return math.ceil(len(text.split()) * TOKENS_PER_WORD)


def chunking_params(target_tokens: int, max_tokens: int, overlap_tokens: int) -> dict:
    """What a saved index records of how its chunks were cut (faiss manifest, pgvector meta).

    The sentence splitter's version is among them: a chunk's boundaries move when it changes,
    so an index cut by another splitter is rebuilt, not reused."""
    return {"target_tokens": target_tokens, "max_tokens": max_tokens, "overlap_tokens": overlap_tokens,
            "token_estimate": "ceil(whitespace_words*1.3)", "sentences": SPLITTER_VERSION,
            "embed_text": "title+heading+text"}


def split_sentences(text: str) -> list[str]:
    """The text's sentences (``program.text.sentences``: syntok, and every line break). Every
    character but the whitespace between sentences is kept."""
    return sentences(text)


def split_sections(text: str) -> list[tuple[str, list[str]]]:
    """Return ``[(heading, [paragraph, ...]), ...]``; text before any heading has heading ""."""
    return [(h, [p for p, _ in ps]) for h, ps in paged_sections(text)]


def paged_sections(text: str) -> list[tuple[str, list[tuple[str, int]]]]:
    """``[(heading, [(paragraph, page), ...]), ...]``: :func:`split_sections` with each paragraph's
    page (0 before any ``<!-- page N -->`` line)."""
    sections: list[tuple[str, list[tuple[str, int]]]] = [("", [])]
    para: list[str] = []
    in_fence = False
    page = 0

    def flush() -> None:
        if para:
            sections[-1][1].append(("\n".join(para).strip(), page))
            para.clear()

    for line in text.replace("\r\n", "\n").split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            para.append(line)
            continue
        mark = None if in_fence else PAGE_MARK.match(line.strip())
        if mark:
            flush()
            page = int(mark.group(1))
            continue
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush()
            sections.append((m.group(2), []))
        elif not line.strip() and not in_fence:
            flush()
        else:
            para.append(line)
    flush()
    return [(h, [(p, n) for p, n in ps if p]) for h, ps in sections if any(p for p, _ in ps)]


def _word_windows(text: str, max_tokens: int) -> list[str]:
    words = text.split()
    step = max(1, int(max_tokens / TOKENS_PER_WORD))
    return [" ".join(words[i:i + step]) for i in range(0, len(words), step)]


def _units(paragraph: str, max_tokens: int) -> list[str]:
    """Split a paragraph into pieces of at most ``max_tokens`` (sentences, then word windows)."""
    if count_tokens(paragraph) <= max_tokens:
        return [paragraph]
    out: list[str] = []
    for sentence in split_sentences(paragraph):
        out.extend([sentence] if count_tokens(sentence) <= max_tokens else _word_windows(sentence, max_tokens))
    return out


def _tail(pieces: list[tuple[str, int]], overlap_tokens: int) -> list[tuple[str, int]]:
    """The last ~``overlap_tokens`` of a chunk, as (text, paragraph index) pieces."""
    if overlap_tokens <= 0 or not pieces:
        return []
    last_text, para = pieces[-1]
    sentences = split_sentences(last_text)
    kept: list[str] = []
    for s in reversed(sentences):
        if count_tokens(" ".join([s] + kept)) > overlap_tokens:
            break
        kept.insert(0, s)
    if not kept:  # the last sentence alone is too long: take trailing words
        kept = [" ".join(last_text.split()[-max(1, int(overlap_tokens / TOKENS_PER_WORD)):])]
    return [(" ".join(kept), para)]


def _join(pieces: list[tuple[str, int]]) -> str:
    out = ""
    for i, (text, para) in enumerate(pieces):
        if i:
            out += " " if para == pieces[i - 1][1] else "\n\n"
        out += text
    return out


def chunk_document(doc, target_tokens: int = 200, max_tokens: int = 300,
                   overlap_tokens: int = 30) -> list[Chunk]:
    """Split one document into chunks (see the module docstring).

    Args:
        doc: a :class:`~program.retrieval.corpus.Document` (needs doc_id, text, title;
            url and source_path are used when present).
        target_tokens: pack paragraphs until a chunk would exceed this many (approximate) tokens.
        max_tokens: hard cap per piece before overlap is added; longer paragraphs are split.
        overlap_tokens: approximate tokens carried from the previous chunk's tail.

    Returns:
        Chunks in document order, ids ``f"{doc.doc_id}#0"``, ``#1``, …; [] for an empty text.

    Raises:
        ValueError: unless ``0 < target_tokens <= max_tokens`` and ``0 <= overlap_tokens < target_tokens``.
    """
    if not 0 < target_tokens <= max_tokens:
        raise ValueError(f"need 0 < target_tokens <= max_tokens, got {target_tokens}, {max_tokens}")
    if not 0 <= overlap_tokens < target_tokens:
        raise ValueError(f"need 0 <= overlap_tokens < target_tokens, got {overlap_tokens}, {target_tokens}")
    texts: list[tuple[str, str, int]] = []  # (heading, text, page)
    for heading, paragraphs in paged_sections(doc.text):
        pieces: list[tuple[str, int]] = []
        fresh = 0  # tokens in `pieces` that are not overlap
        first_page = 0
        for p_idx, (paragraph, page) in enumerate(paragraphs):
            for unit in _units(paragraph, max_tokens):
                size = count_tokens(unit)
                if fresh and count_tokens(_join(pieces)) + size > target_tokens:
                    texts.append((heading, _join(pieces), first_page))
                    pieces = _tail(pieces, overlap_tokens)
                    if count_tokens(_join(pieces)) + size > max_tokens:
                        pieces = []
                    fresh = 0
                if not fresh:
                    first_page = page
                pieces.append((unit, p_idx))
                fresh += size
        if fresh:
            texts.append((heading, _join(pieces), first_page))
    return [Chunk(f"{doc.doc_id}#{n}", doc.doc_id, text, doc.title, getattr(doc, "url", "") or "",
                  heading, getattr(doc, "source_path", "") or "", page)
            for n, (heading, text, page) in enumerate(texts)]
