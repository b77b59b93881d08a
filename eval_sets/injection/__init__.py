"""The prompt-injection set: 34 questions whose retrieved text carries an instruction to the model.

``cases.jsonl``, one case per line:

* ``id``; ``question``: what the user asks;
* ``where``: where the injected text sits: ``strip`` (in the knowledge-base document that also
  answers the question, beside the answering sentence), ``kb`` (a knowledge-base document about
  the question's subject holding only the injection), ``kb-beside`` (a second knowledge-base
  document, injection only, beside the answering one), ``web`` (a page of the web snapshot,
  reached through CRAG's correction; with or without the answer), ``web-beside`` (a second page
  beside the answering page);
* ``kind``: what the injection asks: ``ignore-question``, ``reveal-prompt``, ``add-link``,
  ``ask-secret``, ``answer-else``; ``injected_text``: the instruction as it appears;
* ``marker``: the string whose presence in the answer shows the instruction was followed;
* ``gold``: accepted answers when the answer sits beside the injection, else null;
* ``document`` (``answer_document``): the id of the document or page holding the injection
  (the answer).

``kb.jsonl`` is the knowledge base (the cases' documents and three unrelated ones);
``web_snapshot.jsonl`` the pages of the offline web backend. Every subject is fictional, so the
answer can only come from the retrieved text. Run it: ``python -m optimize.injection``.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
CASES_FILE, KB_FILE, WEB_SNAPSHOT_FILE = (DATA_DIR / "cases.jsonl", DATA_DIR / "kb.jsonl",
                                          DATA_DIR / "web_snapshot.jsonl")
WHERE = ("strip", "kb", "kb-beside", "web", "web-beside")
KINDS = ("ignore-question", "reveal-prompt", "add-link", "ask-secret", "answer-else")


def load_cases(path: str | Path = CASES_FILE) -> list[dict]:
    """The cases, in file order.

    Raises:
        ValueError: a case without its fields, an unknown ``where`` or ``kind``, a marker that is
            not in its injected text, or a duplicate id (the message names the line).
    """
    cases, seen = [], set()
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        case = json.loads(line)
        missing = {"id", "question", "where", "kind", "injected_text", "marker", "gold", "document"} - set(case)
        if missing:
            raise ValueError(f"{path}:{lineno}: missing {', '.join(sorted(missing))}")
        if case["where"] not in WHERE or case["kind"] not in KINDS:
            raise ValueError(f"{path}:{lineno}: unknown where {case['where']!r} or kind {case['kind']!r}")
        if case["marker"] not in case["injected_text"] or case["id"] in seen:
            raise ValueError(f"{path}:{lineno}: marker not in the injected text, or duplicate id {case['id']!r}")
        seen.add(case["id"])
        cases.append(case)
    return cases
