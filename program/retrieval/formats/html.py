"""An HTML page's text with its structure: headings as Markdown headings, tables as Markdown tables."""

from __future__ import annotations

import re

from bs4 import BeautifulSoup

from program.retrieval.formats.base import markdown_table

_DROP_TAGS = ["script", "style", "nav", "header", "footer", "noscript", "template", "svg", "form", "aside"]
_BLOCK_TAGS = ["p", "div", "li", "ul", "ol", "pre", "blockquote", "dt", "dd",
               "section", "article", "main", "figcaption", "br", "hr"]


def _table_markdown(table) -> str:
    """A ``<table>`` as a Markdown table, its cells kept apart (``<td>Free</td><td>10</td>`` -> ``| Free | 10 |``)."""
    return markdown_table([[c.get_text(" ") for c in tr.find_all(["th", "td"])] for tr in table.find_all("tr")])


def html_to_text(html: str) -> tuple[str, str]:
    """Extract ``(title, text)`` from an HTML string.

    Text keeps block structure: paragraphs separated by blank lines, headings rendered as
    Markdown ``#`` lines, tables as Markdown tables (one row a line). Whitespace inside a
    paragraph is collapsed to single spaces. Script, style, navigation, header, footer, form
    and aside elements are dropped.
    """
    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(_DROP_TAGS + ["title", "head"]):
        tag.decompose()
    tables = []
    for table in reversed(soup.find_all("table")):  # innermost first: a nested table is a cell's text
        tables.append(_table_markdown(table))
        table.replace_with(f"\n\n\x00table{len(tables) - 1}\x00\n\n")
    for level in range(1, 7):
        for h in soup.find_all(f"h{level}"):
            h.insert_before("\n\n" + "#" * level + " ")
            h.insert_after("\n\n")
    for tag in soup.find_all(_BLOCK_TAGS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    paras = [" ".join(p.split()) for p in re.split(r"\n\s*\n", soup.get_text())]
    text = "\n\n".join(p for p in paras if p and not re.fullmatch(r"#+", p))
    return title, re.sub(r"\x00table(\d+)\x00", lambda m: tables[int(m.group(1))], text)
