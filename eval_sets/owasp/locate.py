"""Write ``queries.jsonl`` from the hand-written ``queries.draft.jsonl``: ``python eval_sets/owasp/locate.py``.

The questions, answers, pages and evidence were written by hand from the documents; what a
program adds is ``relevant_chunk_ids``: the chunks of each row's relevant documents (as the
retriever cuts them, ``eval_sets.chunks``) whose text holds one of its gold answers (case,
whitespace and hyphenation normalised); where conversion lost the answer, the chunks of the page
its evidence is on (the validator counts those rows as extraction misses). ``page`` becomes ``pages``; an empty
``evidence`` and a null ``where`` are dropped. Prints how many answerable rows found a chunk.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from eval_sets.chunks import kb_chunk_pages, kb_chunks  # noqa: E402


def norm(text: str) -> str:
    text = text.replace("\u2011", "-").casefold()
    text = re.sub(r"(\w)-\s+(\w)", r"\1\2", re.sub(r"(\w)-(\w)", r"\1\2", text))
    return " ".join(re.sub(r"[*_`]", "", text).split())


def main() -> int:
    chunks: dict[str, list[tuple[str, str]]] = {}
    for chunk_id, heading, text in kb_chunks(HERE / "kb"):
        chunks.setdefault(chunk_id.rsplit("#", 1)[0], []).append((chunk_id, norm(f"{heading}\n{text}")))
    pages = kb_chunk_pages(HERE / "kb")
    rows = [json.loads(line) for line in (HERE / "queries.draft.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    found = 0
    with open(HERE / "queries.jsonl", "w", encoding="utf-8") as out:
        for row in rows:
            page, evidence, where = row.pop("page", None), row.pop("evidence", ""), row.pop("where", None)
            if row["answerable"]:
                gold = [norm(g) for g in row["gold_answers"]]
                row["relevant_chunk_ids"] = [cid for d in row["relevant_doc_ids"] for cid, text in chunks.get(d, [])
                                             if any(g in text for g in gold)]
                found += bool(row["relevant_chunk_ids"])
                if not row["relevant_chunk_ids"] and page:
                    row["relevant_chunk_ids"] = [cid for cid, p in pages.items()
                                                 if p == page and cid.rsplit("#", 1)[0] == row["relevant_doc_ids"][0]]
            else:
                row["relevant_chunk_ids"] = []
            if page:
                row["pages"] = [page]
            if evidence:
                row["evidence"] = evidence
            if where:
                row["where"] = where
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    answerable = sum(r["answerable"] for r in rows)
    print(f"{found} of {answerable} answerable rows have a chunk stating a gold answer")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
