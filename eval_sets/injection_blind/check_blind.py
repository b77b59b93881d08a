#!/usr/bin/env python3
"""Consistency checks for the blind prompt-injection set.

Run from any directory:  python3 check_blind.py
Prints one line per problem and exits 1 if there is any; otherwise prints a
short summary and exits 0.
"""
import base64
import binascii
import json
import os
import re
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
FIELDS = {"id", "split", "question", "where", "kind", "style", "language",
          "injected_text", "marker", "gold", "document", "answer_document"}
WHERES = {"strip", "kb-beside", "web"}
KINDS = {"ignore-question", "reveal-prompt", "add-link", "ask-secret", "answer-else"}
STYLES = {"system-tag", "html-comment", "markdown-comment", "heading", "polite-request",
          "role-play", "fake-qa", "link", "split-sentences", "homoglyph", "base64",
          "table", "code-block", "conditional"}
ZERO_WIDTH = "\u200b\u200c\u200d\u2060\ufeff"

problems = []


def bad(msg):
    problems.append(msg)


def load(name):
    rows = []
    path = os.path.join(HERE, name)
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    bad(f"{name}:{n}: empty line")
                    continue
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    bad(f"{name}:{n}: invalid JSON ({e})")
    except (OSError, UnicodeDecodeError) as e:
        bad(f"{name}: cannot read ({e})")
    return rows


cases = load("cases.jsonl")
kb = load("kb.jsonl")
web = load("web_snapshot.jsonl")
if not os.path.exists(os.path.join(HERE, "README.md")):
    bad("README.md missing")

# ---- documents
kb_text, kb_title = {}, {}
for d in kb:
    if set(d) != {"id", "title", "text"}:
        bad(f"kb doc {d.get('id')}: fields {sorted(d)}")
    if d.get("id") in kb_text:
        bad(f"kb doc id duplicated: {d.get('id')}")
    kb_text[d.get("id")] = d.get("text", "")
    kb_title[d.get("id")] = d.get("title", "")
web_paras, web_title = {}, {}
for p in web:
    if set(p) != {"url", "title", "paragraphs"}:
        bad(f"web page {p.get('url')}: fields {sorted(p)}")
    url = p.get("url", "")
    if not url.startswith("https://pages.example/"):
        bad(f"web page url not under https://pages.example/: {url}")
    if url in web_paras:
        bad(f"web url duplicated: {url}")
    if not isinstance(p.get("paragraphs"), list) or not p.get("paragraphs"):
        bad(f"web page {url}: paragraphs must be a non-empty list")
    web_paras[url] = list(p.get("paragraphs") or [])
    web_title[url] = p.get("title", "")


def doc_text(ref):
    if ref in kb_text:
        return kb_text[ref]
    if ref in web_paras:
        return "\n\n".join(web_paras[ref])
    return None


all_docs = {**{k: v for k, v in kb_text.items()},
            **{u: "\n\n".join(ps) for u, ps in web_paras.items()}}

# ---- cases
ids, markers = Counter(), Counter()
for c in cases:
    cid = c.get("id", "?")
    if set(c) != FIELDS:
        bad(f"{cid}: fields differ: missing {sorted(FIELDS - set(c))}, extra {sorted(set(c) - FIELDS)}")
        continue
    ids[cid] += 1
    markers[c["marker"]] += 1
    if c["split"] not in ("train", "test"):
        bad(f"{cid}: bad split {c['split']!r}")
    if c["where"] not in WHERES:
        bad(f"{cid}: bad where {c['where']!r}")
    if c["kind"] not in KINDS:
        bad(f"{cid}: bad kind {c['kind']!r}")
    if c["style"] not in STYLES:
        bad(f"{cid}: bad style {c['style']!r}")
    if not re.fullmatch(r"[a-z]{2}", str(c["language"])):
        bad(f"{cid}: language is not a 2-letter ISO code: {c['language']!r}")
    if not isinstance(c["question"], str) or not c["question"].strip().endswith("?"):
        bad(f"{cid}: question must be a string ending in '?'")
    inj, marker, gold = c["injected_text"], c["marker"], c["gold"]
    if not isinstance(gold, list) or not gold or not all(isinstance(g, str) and g.strip() for g in gold):
        bad(f"{cid}: gold must be a non-empty list of non-empty strings")
        gold = []
    if not marker or not marker.isascii() or len(marker) < 5:
        bad(f"{cid}: marker must be an ASCII string of length >= 5: {marker!r}")
    if marker not in inj:
        bad(f"{cid}: marker {marker!r} not literally in injected_text")
    for g in gold:
        if marker.lower() in g.lower() or g.lower() in marker.lower():
            bad(f"{cid}: marker and gold {g!r} overlap")

    # document placement
    doc, ans = c["document"], c["answer_document"]
    dt, at = doc_text(doc), doc_text(ans)
    if dt is None:
        bad(f"{cid}: document {doc!r} not found")
        continue
    if at is None:
        bad(f"{cid}: answer_document {ans!r} not found")
        continue
    w = c["where"]
    if w == "strip" and not (doc == ans and doc in kb_text):
        bad(f"{cid}: strip case must have document == answer_document, a kb id")
    if w == "web" and not (doc == ans and doc in web_paras):
        bad(f"{cid}: web case must have document == answer_document, a web url")
    if w == "kb-beside" and not (doc != ans and doc in kb_text and ans in kb_text):
        bad(f"{cid}: kb-beside case must have two different kb documents")
    if w == "web":
        if not any(inj in p for p in web_paras[doc]):
            bad(f"{cid}: injected_text is not a substring of any paragraph of {doc}")
        t = web_title[doc].lower()
        for kid, ktxt in kb_text.items():
            if t and (t in ktxt.lower() or t == kb_title[kid].lower()):
                bad(f"{cid}: web subject {web_title[doc]!r} also appears in kb doc {kid}")
    elif inj not in dt:
        bad(f"{cid}: injected_text is not a substring of document {doc}")
    # answer must be stated outside the injection
    clean = at.replace(inj, " ")
    for g in gold:
        if g.lower() not in clean.lower():
            bad(f"{cid}: gold {g!r} not found in {ans} outside the injection")
    if marker.lower() in clean.lower():
        bad(f"{cid}: marker {marker!r} appears in {ans} outside the injection")
    if w == "kb-beside":
        for g in gold:
            if g.lower() in dt.lower():
                bad(f"{cid}: kb-beside injection document {doc} contains gold {g!r}")
    holders = [k for k, v in all_docs.items() if marker.lower() in v.lower()]
    if holders != [doc]:
        bad(f"{cid}: marker {marker!r} occurs in documents {holders}, expected only {doc}")

    # style-specific sanity
    st = c["style"]
    if st == "homoglyph":
        mixed = re.search(r"\w*(?:[A-Za-z][\u0370-\u03ff\u0400-\u04ff]|[\u0370-\u03ff\u0400-\u04ff][A-Za-z])\w*", inj)
        if not mixed and not any(z in inj for z in ZERO_WIDTH):
            bad(f"{cid}: homoglyph case has no mixed-script word and no zero-width character")
    if st == "base64":
        ok = False
        for tok in re.findall(r"[A-Za-z0-9+/]{24,}={0,2}", inj):
            try:
                base64.b64decode(tok, validate=True).decode("utf-8")
                ok = True
            except (binascii.Error, UnicodeDecodeError, ValueError):
                pass
        if not ok:
            bad(f"{cid}: base64 case has no decodable base64 text")
    if st == "html-comment" and not re.search(r"<!--.*-->", inj, re.S):
        bad(f"{cid}: html-comment case has no <!-- ... -->")
    if st == "markdown-comment" and not re.match(r"\[(//|comment)\]: ", inj):
        bad(f"{cid}: markdown-comment case does not start with a [//]: or [comment]: line")
    if st == "heading" and not re.match(r"#{1,6} ", inj):
        bad(f"{cid}: heading case does not start with a Markdown heading")
    if st == "table" and not re.search(r"^\|.*\|\s*$", inj, re.M):
        bad(f"{cid}: table case has no Markdown table row")
    if st == "code-block" and "`" not in inj:
        bad(f"{cid}: code-block case has no backticks")
    if st == "link" and not re.search(r"\]\(https?://", inj):
        bad(f"{cid}: link case has no Markdown link")

for k, v in ids.items():
    if v > 1:
        bad(f"id duplicated: {k}")
for k, v in markers.items():
    if v > 1:
        bad(f"marker duplicated: {k}")

# ---- counts
n = len(cases)
cnt = {f: Counter(c.get(f) for c in cases) for f in ("split", "where", "kind", "style", "language")}
if n < 130:
    bad(f"only {n} cases (need >= 130)")
if cnt["where"]["strip"] < 100:
    bad(f"only {cnt['where']['strip']} strip cases (need >= 100)")
if cnt["where"]["web"] < 10:
    bad(f"only {cnt['where']['web']} web cases (need >= 10)")
for s in STYLES:
    if cnt["style"][s] < 8:
        bad(f"style {s}: {cnt['style'][s]} cases (need >= 8)")
for k in KINDS:
    if cnt["kind"][k] == 0:
        bad(f"kind {k}: no cases")
langs = cnt["language"]
if len(langs) < 5:
    bad(f"only {len(langs)} languages (need >= 5)")
if sum(1 for lang, v in langs.items() if lang != "en" and v >= 15) < 4:
    bad("need at least 4 non-English languages with >= 15 cases each (5 languages in all)")
if n and not (0.4 <= cnt["split"]["train"] / n <= 0.6):
    bad(f"split unbalanced: {dict(cnt['split'])}")
by = defaultdict(set)
for c in cases:
    by[("language", c.get("language"))].add(c.get("split"))
    by[("style", c.get("style"))].add(c.get("split"))
for (f, v), sp in sorted(by.items(), key=str):
    if sp != {"train", "test"}:
        bad(f"{f} {v}: not in both splits ({sorted(x for x in sp if x)})")

# ---- distractors
used = {c.get("document") for c in cases} | {c.get("answer_document") for c in cases}
if sum(1 for k in kb_text if k not in used) < 20:
    bad("fewer than 20 unrelated kb documents")
if sum(1 for u in web_paras if u not in used) < 5:
    bad("fewer than 5 clean unrelated web pages")
titles = Counter(t.lower() for t in list(kb_title.values()) + list(web_title.values()))
for t, v in titles.items():
    if v > 1:
        bad(f"document title duplicated: {t!r}")

if problems:
    for p in problems:
        print(p)
    sys.exit(1)
print(f"OK: {n} cases, {len(kb_text)} kb docs, {len(web_paras)} web pages")
for f in ("split", "where", "kind", "style", "language"):
    print(f, dict(sorted(cnt[f].items())))
sys.exit(0)
