"""Main-text extraction from HTML with beautifulsoup4 (the "transcribe the page" step of CRAG §4.3).

Boilerplate is removed before any text is read: scripts, styles, navigation, page headers and
footers, asides, forms, and elements whose id, class or role marks them as cookie or consent
banners, menus or ads. What remains is read as blocks in document order: headings,
paragraphs, list items (plus ``pre``, ``blockquote``, table cells and ``dd``), one block per line, so
that decompose-then-recompose sees the page's own sentence boundaries. The title is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bs4 import BeautifulSoup, Tag

DROP_TAGS = ("script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed",
             "nav", "header", "footer", "aside", "form", "button", "input", "select", "textarea", "dialog", "menu")
DROP_ROLES = {"navigation", "banner", "contentinfo", "search", "dialog", "alertdialog", "menu", "menubar",
              "complementary"}
# id/class words that mark boilerplate; matched as whole words of the attribute.
BOILERPLATE = re.compile(
    r"(^|[\s_-])(cookies?|consent|gdpr|cmp|banner|navbar|nav|menu|breadcrumbs?|sidebar|footer|header|"
    r"advert|ads?|promo|newsletter|subscribe|share|social|related|comments?|popup|modal|skip-link)($|[\s_-])",
    re.I)
BLOCK_TAGS = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "pre", "blockquote", "td", "th", "dd", "dt", "figcaption")
MAIN_SELECTORS = ("main", "article", "[role=main]", "#content", "#main-content", "#mw-content-text")
_SPACE = re.compile(r"\s+")


@dataclass
class ExtractedPage:
    """A page's title and main text (blocks joined with newlines)."""

    title: str
    text: str


def plain_text(fragment: str) -> str:
    """An HTML fragment (a search snippet with ``<strong>``, ``&amp;``...) as plain text on one line."""
    if "<" not in fragment and "&" not in fragment:
        return _SPACE.sub(" ", fragment).strip()
    return _SPACE.sub(" ", BeautifulSoup(fragment, "html.parser").get_text(" ")).strip()


def _is_boilerplate(tag: Tag) -> bool:
    if tag.attrs is None:
        return False
    if (tag.get("role") or "").lower() in DROP_ROLES or tag.get("aria-hidden") == "true" or tag.has_attr("hidden"):
        return True
    marks = " ".join([tag.get("id") or "", " ".join(tag.get("class") or [])])
    return bool(marks.strip()) and bool(BOILERPLATE.search(marks)) and tag.name not in (
        "html", "body", "main", "article")


def _title(soup: BeautifulSoup) -> str:
    meta = soup.find("meta", attrs={"property": "og:title"})
    for candidate in (soup.title.get_text() if soup.title else "", meta.get("content", "") if meta else ""):
        if candidate and candidate.strip():
            return _SPACE.sub(" ", candidate).strip()
    h1 = soup.find("h1")
    return _SPACE.sub(" ", h1.get_text(" ")).strip() if h1 else ""


def extract_main_text(html: str) -> ExtractedPage:
    """Title and main text of an HTML page.

    Returns:
        ``ExtractedPage(title, text)``: ``text`` holds one block (heading, paragraph, list item...)
        per line, whitespace collapsed, boilerplate dropped; a page whose body has no blocks
        falls back to its visible text. Both are "" for an empty page.

    The main region is the first of ``main``, ``article``, ``[role=main]``, ``#content``... that
    holds text, else the body. A block nested in another block (a ``p`` in an ``li``) is read once,
    as part of the outer one.
    """
    soup = BeautifulSoup(html, "html.parser")
    title = _title(soup)
    for tag in soup.find_all(DROP_TAGS):
        tag.decompose()
    for tag in soup.find_all(_is_boilerplate):
        if not tag.decomposed:
            tag.decompose()
    root = next((found for sel in MAIN_SELECTORS if (found := soup.select_one(sel)) and found.get_text(strip=True)),
                soup.body or soup)
    blocks = []
    for tag in root.find_all(BLOCK_TAGS):
        if tag.find_parent(BLOCK_TAGS) is not None:
            continue  # read as part of its enclosing block
        text = _SPACE.sub(" ", tag.get_text(" ")).strip()
        if text:
            blocks.append(text)
    if not blocks:
        visible = _SPACE.sub(" ", root.get_text(" ")).strip()
        blocks = [visible] if visible else []
    return ExtractedPage(title=title, text="\n".join(blocks))
