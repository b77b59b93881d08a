"""The part of a web page that matches a query, as a search engine returns it.

LangGraph's CRAG tutorial adds the ``content`` its search tool (Tavily) returns for the rewritten
query: the query-relevant extract of each page, not the page's first characters. A backend that
holds whole pages (the offline snapshot's ``content``) gives the page's best-matching chunk as
``snippet``; :func:`query_excerpt` starts from it and fills up to ``max_chars`` with the page's
paragraphs that share the most content words with the query, kept in page order.
"""

from __future__ import annotations

from program.text import content_words


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in text.split("\n\n") if p.strip()]


def _holds(paragraph: str, snippet: str) -> bool:
    """Whether ``paragraph`` is part of ``snippet`` or holds its start (a chunk may begin mid-page)."""
    head = " ".join(snippet.split()[:12])
    flat = " ".join(paragraph.split())
    return bool(head) and (flat in " ".join(snippet.split()) or head in flat)


def query_excerpt(query: str, snippet: str, content: str, max_chars: int = 1500) -> str:
    """Up to ``max_chars`` characters of a hit that match ``query``.

    Args:
        query: the search query.
        snippet: the backend's extract for the query ("" if none).
        content: the whole page text when the backend has it, paragraphs separated by blank
            lines ("" if not: live engines, whose snippet is then the text).
        max_chars: the most characters returned.

    Returns:
        The whole page when it fits; else the paragraphs holding the snippet, then those sharing
        the most content words with the query, in page order, joined by blank lines (a paragraph
        too long for the budget is cut to a window starting where the snippet starts in it);
        the snippet when there is no page. "" when there is neither.
    """
    content, snippet = (content or "").strip(), (snippet or "").strip()
    if not content:
        return snippet[:max_chars]
    if len(content) <= max_chars:
        return content
    asked = content_words(query)
    paragraphs = _paragraphs(content)
    rank = sorted(range(len(paragraphs)), key=lambda i: (
        -_holds(paragraphs[i], snippet), -len(asked & content_words(paragraphs[i])), i))
    chosen, used = [], 0
    for i in rank:
        size = len(paragraphs[i]) + (2 if chosen else 0)
        if used + size > max_chars:
            if not chosen:  # the best paragraph alone is too long: a window of it
                return _window(paragraphs[i], snippet, max_chars)
            continue
        chosen.append(i)
        used += size
    return "\n\n".join(paragraphs[i] for i in sorted(chosen))


def _window(paragraph: str, snippet: str, max_chars: int) -> str:
    """``max_chars`` of ``paragraph`` from where the snippet starts in it, else from its beginning."""
    head = " ".join(snippet.split()[:8])
    start = paragraph.find(head) if head else -1
    start = max(0, min(start, len(paragraph) - max_chars))
    return paragraph[start: start + max_chars]


__all__ = ["query_excerpt"]
