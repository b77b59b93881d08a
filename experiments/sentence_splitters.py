"""Which sentence splitter cuts the knowledge bases' text best: the program's regular expressions
against maintained libraries (pysbd, sentencex, syntok), on every paragraph of the labeled
knowledge bases and of PopQA's 1,399 passages.

There is no hand-labeled gold for sentence boundaries here, so the measure is what a wrong cut
looks like, counted the same way for every splitter:

- **false cuts**: a boundary right after a known abbreviation ("St.", "U.S.", "e.g.", "Dr.",
  "No.", "Inc.", "a.m."...), after a single capital initial ("J. R. Tolkien"), inside a number
  or a version ("1.5", "v1.28"), or before a piece that starts in lower case (a sentence does
  not; a cut in "e.g. the pod" does; a list item or a code span may);
- **missed cuts**: inside one piece, a full stop, "!" or "?" after a lower-case word of three
  or more letters that is not an abbreviation, then a space and a capital: a boundary nobody
  would leave;
- **text kept**: the pieces, joined, hold every non-space character of the paragraph in order;
- seconds for the whole text.

Usage::

    python -m experiments.sentence_splitters [--popqa N] [--out reports/sentence-splitters/summary.json]

Needs ``pip install pysbd sentencex syntok`` (those not installed are skipped, and say so).
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

from eval_sets.domains import DOMAINS
from program.atomic import write_atomic
from program.paths import POPQA_DIR
from program.retrieval import load_documents

ABBREVIATIONS = {
    "st", "u.s", "e.g", "i.e", "dr", "mr", "mrs", "ms", "no", "nos", "vs", "inc", "jr", "sr", "fig", "a.m", "p.m",
    "approx", "dept", "gen", "col", "mt", "ft", "jan", "feb", "mar", "apr", "aug", "sep", "sept", "oct", "nov",
    "dec", "u.k", "u.n", "ph.d", "b.a", "m.a", "ltd", "co", "corp", "vol", "pp", "ed", "rev", "prof", "sgt",
    "lt", "capt", "cf", "al", "est", "min", "max", "etc",
}
# "etc." may end a sentence: a cut after it is not counted as false, nor its absence as missed
SENTENCE_FINAL_ABBREVIATIONS = {"etc"}
_LAST_WORD = re.compile(r"(\S+)\s*$")
_MISSED = re.compile(r"\b([a-z]{3,})[.!?][\"')\]]*\s+[\"'(\[]?[A-Z]")

# the splitters the program had before this measure: the chunker's and the strips' (refinement)
_CHUNKER_END = re.compile(r"[.!?][\"')\]]*(?=\s+\S)")
_STRIP_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")


def _chunker_splitter(text: str) -> list[str]:
    """The chunker's splitter before this measure (``program/retrieval/chunking.py``)."""
    pieces, start = [], 0
    for end in _CHUNKER_END.finditer(text):
        pieces.append(text[start:end.end()])
        start = end.end()
    pieces.append(text[start:])
    return [s.strip() for s in pieces if s.strip()]


def _strip_splitter(text: str) -> list[str]:
    """Refinement's strip splitter before this measure (``program/stages/refine.py``)."""
    return [s.strip() for s in _STRIP_END.split(text) if s.strip()]


def splitters() -> dict[str, object]:
    """``{name: split(text) -> [sentence, ...]}`` for the program's own splitters and each
    library that is installed; prints one line per library that is not."""
    out = {"regex: chunker": _chunker_splitter, "regex: strips": _strip_splitter}
    try:
        import pysbd

        segmenter = pysbd.Segmenter(language="en", clean=False)
        out["pysbd 0.3"] = lambda text: [s.strip() for s in segmenter.segment(text) if s.strip()]
    except ImportError:
        print("pysbd not installed: skipped")
    try:
        import sentencex

        out["sentencex 1.0"] = lambda text: [s.strip() for s in sentencex.segment("en", text) if s.strip()]
    except ImportError:
        print("sentencex not installed: skipped")
    try:
        from syntok import segmenter as syntok

        # sliced from the text by the tokens' offsets: joining the tokens' values would drop or
        # change characters (syntok normalises some, e.g. hyphens at line ends)
        out["syntok 1.4"] = lambda text: [text[sentence[0].offset:sentence[-1].offset + len(sentence[-1].value)]
                                          for para in syntok.process(text) for sentence in para]
    except ImportError:
        print("syntok not installed: skipped")
    return out


def false_cut(left: str, right: str) -> bool:
    """True when a cut between ``left`` and ``right`` is one no sentence boundary makes."""
    match = _LAST_WORD.search(left)
    word = match.group(1) if match else ""
    bare = word.rstrip(".!?\"')]").lower()
    if word.endswith(".") and bare.lstrip("(\"'[") in ABBREVIATIONS - SENTENCE_FINAL_ABBREVIATIONS:
        return True
    if re.fullmatch(r"[\"'(\[]?[A-Z]\.", word):  # an initial
        return True
    if re.search(r"\d\.$", left.rstrip()) and re.match(r"\d", right):  # 1.|5
        return True
    # a list item or a code span may start in lower case; a plain word may not
    if re.match(r"\s*([-*+>]|\d+[.)])\s|\s*`", right):
        return False
    first = right.lstrip("\"'([ ")
    return bool(first) and first[0].islower()


def missed_cuts(piece: str) -> int:
    """Boundaries left inside ``piece``: ``word. Capital`` after a plain lower-case word."""
    return sum(m.group(1) not in ABBREVIATIONS for m in _MISSED.finditer(piece))


def paragraphs(popqa: int) -> dict[str, list[str]]:
    """``{knowledge base: [paragraph, ...]}``: every paragraph of the labeled domains' documents,
    and of the PopQA knowledge base's passages, the first ``popqa`` (0: all); code blocks, tables
    and headings left out."""
    out = {}
    for name, domain in DOMAINS.items():
        out[name] = [p for d in load_documents(domain.kb_dir) for p in _prose(d.text)]
    docs = load_documents(POPQA_DIR / "knowledge_base.jsonl")
    docs = docs[:popqa] if popqa else docs
    out["popqa"] = [p for d in docs for p in _prose(d.text)]
    return out


def _prose(text: str) -> list[str]:
    """The prose paragraphs of a document: no code fences, tables or headings."""
    out, fenced = [], False
    for block in re.split(r"\n\s*\n", text):
        if block.lstrip().startswith(("```", "~~~")):
            fenced = block.count("```") % 2 == 1 or block.count("~~~") % 2 == 1
            continue
        if fenced or block.lstrip().startswith(("|", "#")):
            continue
        out.extend(line.strip() for line in [" ".join(block.split())] if len(line.split()) >= 4)
    return out


def measure(split, texts: list[str]) -> dict:
    """``split`` over ``texts``: sentences, false cuts, missed cuts, texts not kept, seconds."""
    start = time.perf_counter()
    results = [split(t) for t in texts]
    seconds = time.perf_counter() - start
    sentences = false = missed = lost = 0
    for text, pieces in zip(texts, results):
        sentences += len(pieces)
        false += sum(false_cut(pieces[i], pieces[i + 1]) for i in range(len(pieces) - 1))
        missed += sum(missed_cuts(p) for p in pieces)
        lost += "".join(pieces).replace(" ", "") != text.replace(" ", "")
    return {"paragraphs": len(texts), "sentences": sentences, "false_cuts": false, "missed_cuts": missed,
            "paragraphs_not_kept": lost, "seconds": round(seconds, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--popqa", type=int, default=0, help="PopQA passages measured (default 0: all)")
    parser.add_argument("--out", default="reports/sentence-splitters/summary.json")
    args = parser.parse_args(argv)
    texts = paragraphs(args.popqa)
    table = {name: {kb: measure(split, ps) for kb, ps in texts.items()} for name, split in splitters().items()}
    print("| splitter | " + " | ".join(f"{kb}: false / missed" for kb in texts) + " | not kept | s |")
    print("|---|" + "---|" * (len(texts) + 2))
    for name, by_kb in table.items():
        cells = " | ".join(f"{r['false_cuts']} / {r['missed_cuts']}" for r in by_kb.values())
        kept = sum(r["paragraphs_not_kept"] for r in by_kb.values())
        print(f"| {name} | {cells} | {kept} | {sum(r['seconds'] for r in by_kb.values()):.1f} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, json.dumps({"command": "python -m experiments.sentence_splitters",
                                  "paragraphs": {kb: len(p) for kb, p in texts.items()},
                                  "splitters": table}, indent=1).encode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
