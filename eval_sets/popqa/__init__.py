"""PopQA long-tail: paths of the data files and a deterministic, relation-stratified sampler.

Files (see README.md in this folder):
    ``QUESTIONS_PATH``       questions.dev.jsonl   1,099 questions with gold answers
    ``KNOWLEDGE_BASE_PATH``  knowledge_base.jsonl  1,399 internal documents (``doc_id``, ``text``)
    ``WEB_SNAPSHOT_PATH``    web_snapshot.jsonl    1,580 offline web pages (``url``, ``title``, ``paragraphs``)

Sampling rule of :func:`load_questions` (the file is grouped by relation, so a plain head would
be all "occupation"): the questions of each relation are shuffled with a generator seeded by
``(seed, relation)``; the relations themselves are put in an order shuffled by ``seed``; then
questions are dealt round-robin, one per relation per round, skipping relations that ran out.
The full dealt order is fixed by ``seed``, and ``limit=N`` takes its first N rows, so

* the same ``limit`` and ``seed`` always give the same ids, in the same order;
* the sample is prefix-stable: the sample for N is contained in the sample for N + k;
* any ``limit >= number of relations`` (14) covers every relation.

Round-robin over-represents small relations compared with the file's own distribution (for
14 relations each gets ~N/14 until the small ones, e.g. "capital of" with 4 rows, run out);
that is deliberate: small samples should show every kind of question.

The fixed train/dev split (``split.json``, rule in ``SPLIT_RULE`` and README.md): judges and
prompts learn only from ``train``; evaluation runs sample only from ``dev``. :func:`load_questions`
deals from one split (``split="dev"`` by default; ``split=None`` for tools that need every
question); :func:`make_split` regenerates the split (``tests/test_popqa_split.py`` checks that the
committed file equals its output), :func:`write_split` writes it::

    python -c "from eval_sets.popqa import write_split; write_split()"
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from program.atomic import write_atomic
from program.jsonl import read_objects

POPQA_DIR = Path(__file__).resolve().parent
QUESTIONS_PATH = POPQA_DIR / "questions.dev.jsonl"
KNOWLEDGE_BASE_PATH = POPQA_DIR / "knowledge_base.jsonl"
WEB_SNAPSHOT_PATH = POPQA_DIR / "web_snapshot.jsonl"
SPLIT_PATH = POPQA_DIR / "split.json"

#: the seed of the committed split
SPLIT_SEED = 0
#: questions in ``dev`` out of the 1,099 (the rest, about 800, in ``train``), before the
#: adversarial constraint moves a few
DEV_SIZE = 300
#: the splits :func:`load_questions` accepts (None: every question)
SPLITS = ("train", "dev")

SPLIT_RULE = (
    "Two splits, train (judges and prompts learn only from it) and dev (evaluation runs sample only "
    "from it). First the adversarial constraint: the hand-labeled adversarial set "
    "(eval_sets/adversarial/*.jsonl) reuses PopQA material in its rows whose source starts with "
    "'popqa': 'popqa:kb-N' is the knowledge-base document of question popqa-N, 'web:<Title>' a web page "
    "of the question whose subject_wiki_title is <Title> (underscores for spaces; failing that, of the "
    "questions whose subject is <Title> without a trailing parenthesis), a bare 'popqa' source names "
    "its documents in relevant_doc_ids (kb-N), and a row whose question text equals a PopQA question "
    "(question or disambiguated_question) uses that question. A PopQA question whose material appears in "
    "an adversarial dev or test row is in dev; one whose material appears only in adversarial train "
    "rows is in train. Then, within each relation, the other questions (in file order) are shuffled "
    "with random.Random(f'{seed}:{relation}') and the first ones go to dev until the relation's dev "
    "count reaches round(n_relation * 300 / 1099) (at least 1, at most n_relation - 1; never fewer "
    "than the questions the constraint put in dev); the rest go to train. Ids are listed sorted."
)

_FIELDS = ("id", "question", "possible_answers", "relation", "subject")


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSON-lines file into a list of dicts (blank lines skipped; ``program.jsonl``).

    Raises:
        FileNotFoundError: the file does not exist.
        program.jsonl.JsonlError: a line is not a JSON object.
    """
    return read_objects(path)


def round_robin_order(rows: list[dict], seed: int = 0, key: str = "relation") -> list[dict]:
    """Deal ``rows`` round-robin over the groups given by ``row[key]`` (rule in the module doc).

    Args:
        rows: the rows, in any order (the result does not depend on ties in file order
            beyond each group's own file order, which the seeded shuffle then permutes).
        seed: integer seed; the same seed always gives the same order.
        key: the field to group by.

    Returns:
        All of ``rows`` (same dict objects), reordered; length ``len(rows)``.
    """
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(str(row.get(key, "")), []).append(row)
    for name, members in groups.items():
        # str seeds are hashed with sha512 by random.Random: stable across runs and platforms.
        random.Random(f"{seed}:{name}").shuffle(members)
    names = sorted(groups)
    random.Random(seed).shuffle(names)
    ordered: list[dict] = []
    depth = max((len(m) for m in groups.values()), default=0)
    for i in range(depth):
        ordered.extend(groups[name][i] for name in names if i < len(groups[name]))
    return ordered


def load_split(path: str | Path = SPLIT_PATH) -> dict[str, set[str]]:
    """The committed train/dev split: ``{"train": set of ids, "dev": set of ids}`` (rule: ``SPLIT_RULE``).

    Raises:
        FileNotFoundError: the split file is missing.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return {name: set(data[name]) for name in SPLITS}


def _parse_source(row: dict) -> list[str]:
    """The PopQA references of an adversarial row's ``source``: ``kb-N`` and ``web:<Title>`` items."""
    source = str(row.get("source") or "")
    if source == "popqa":  # the rewrite rows: the documents are in relevant_doc_ids
        return [str(d) for d in row.get("relevant_doc_ids") or []]
    if not source.startswith("popqa:"):
        return []
    parts = source[len("popqa:"):].split("+")
    return [p[len("popqa:"):] if p.startswith("popqa:") else p for p in parts if p]


def adversarial_usage(questions: list[dict] | None = None, adversarial_dir: str | Path | None = None
                      ) -> tuple[dict[str, set[str]], list[str]]:
    """Which adversarial splits use each PopQA question's material (rule: ``SPLIT_RULE``).

    Args:
        questions: the PopQA rows (default: every row of ``QUESTIONS_PATH``).
        adversarial_dir: folder of the adversarial JSONL files (default: ``eval_sets/adversarial``).

    Returns:
        ``(usage, unresolved)``: ``usage`` maps a question id to the set of adversarial splits
        (``train``, ``dev``, ``test``) of the rows that use its knowledge-base document, one of its
        web pages or its question text; ``unresolved`` lists ``"<row id>: <reference>"`` for each
        ``web:`` reference that names no question (a ``kb-N`` whose question is not among the
        1,099 is simply not a question's material).
    """
    from eval_sets.adversarial import KINDS, load_rows

    questions = read_jsonl(QUESTIONS_PATH) if questions is None else questions
    ids = {q["id"] for q in questions}
    by_title: dict[str, set[str]] = {}
    by_subject: dict[str, set[str]] = {}
    by_text: dict[str, set[str]] = {}
    for q in questions:
        by_title.setdefault(str(q.get("subject_wiki_title") or ""), set()).add(q["id"])
        by_subject.setdefault(str(q.get("subject") or ""), set()).add(q["id"])
        for key in ("question", "disambiguated_question"):
            if q.get(key):
                by_text.setdefault(" ".join(str(q[key]).split()).casefold(), set()).add(q["id"])
    usage: dict[str, set[str]] = {}
    unresolved: list[str] = []
    for kind in KINDS:
        for row in load_rows(kind, None, adversarial_dir):
            refs = _parse_source(row)
            used: set[str] = set()
            for ref in refs:
                if ref.startswith("kb-"):
                    qid = f"popqa-{ref[3:]}"
                    used |= {qid} & ids
                elif ref.startswith("web:"):
                    title = ref[4:].replace("_", " ")
                    found = by_title.get(title) or by_subject.get(title.split(" (")[0].strip()) or set()
                    if not found:
                        unresolved.append(f"{row.get('id')}: {ref}")
                    used |= found
            if refs and row.get("question"):
                used |= by_text.get(" ".join(str(row["question"]).split()).casefold(), set())
            for qid in used:
                usage.setdefault(qid, set()).add(str(row.get("split")))
    return usage, unresolved


def make_split(seed: int = SPLIT_SEED, path: str | Path = QUESTIONS_PATH,
               adversarial_dir: str | Path | None = None, dev_size: int = DEV_SIZE) -> dict:
    """The train/dev split by ``SPLIT_RULE``: adversarial material first, then stratified by relation.

    Args:
        seed: the shuffle seed (the committed split uses ``SPLIT_SEED``).
        path: the questions file.
        adversarial_dir: the adversarial set's folder (default: ``eval_sets/adversarial``).
        dev_size: dev questions aimed at over the whole file (each relation gets its share).

    Returns:
        ``{"seed": int, "rule": str, "train": [ids], "dev": [ids]}``, ids sorted; the two lists are
        disjoint and together hold every question of ``path``.
    """
    questions = read_jsonl(path)
    usage, _ = adversarial_usage(questions, adversarial_dir)
    share = dev_size / len(questions)
    groups: dict[str, list[str]] = {}
    for q in questions:
        groups.setdefault(str(q.get("relation", "")), []).append(q["id"])
    train: list[str] = []
    dev: list[str] = []
    for relation in sorted(groups):
        members = groups[relation]
        forced_dev = [i for i in members if usage.get(i, set()) & {"dev", "test"}]
        forced_train = [i for i in members if usage.get(i) and i not in forced_dev]
        rest = [i for i in members if i not in usage]
        random.Random(f"{seed}:{relation}").shuffle(rest)
        target = min(max(1, round(len(members) * share)), len(members) - 1)
        take = max(0, target - len(forced_dev))
        if not forced_train:  # keep at least one train question per relation
            take = min(take, len(rest) - 1)
        dev += forced_dev + rest[:take]
        train += forced_train + rest[take:]
    return {"seed": seed, "rule": SPLIT_RULE, "train": sorted(train), "dev": sorted(dev)}


def write_split(path: str | Path = SPLIT_PATH, seed: int = SPLIT_SEED) -> dict:
    """Write :func:`make_split`'s result to ``path`` (atomically: a temporary file renamed into place)."""
    split = make_split(seed)
    path = Path(path)
    write_atomic(path, json.dumps(split, indent=1) + "\n")
    return split


def load_questions(limit: int | None = None, seed: int = 0, path: str | Path = QUESTIONS_PATH,
                   split: str | None = "dev") -> list[dict]:
    """Load PopQA questions of one split, optionally a seeded sample spread over the relations.

    Args:
        limit: number of questions to return; None (or a number ≥ the split's size) returns all
            of them, in the dealt order described in the module docstring.
        seed: seed of the sample; same ``limit`` + ``seed`` + ``split`` → same ids.
        path: the questions file (default: ``QUESTIONS_PATH``).
        split: ``"dev"`` (default: what evaluation runs use), ``"train"`` (what judges and
            prompts may learn from), or None for every question (tools that need them all).
            The split's ids come from ``split.json`` (:func:`load_split`); the round-robin deal
            runs over that split's questions only.

    Returns:
        A list of ``min(limit, size of the split)`` dicts with keys ``id`` (str, e.g.
        ``"popqa-0001"``), ``question`` (str), ``possible_answers`` (list[str], any one counts as
        correct), ``relation`` (str) and ``subject`` (str).

    Raises:
        ValueError: ``limit`` is not positive, or ``split`` is not ``train``, ``dev`` or None
            (PopQA has no ``test`` split: the CRAG paper's test questions are our dev file).
        FileNotFoundError: the questions file (or the split file) is missing.
    """
    if limit is not None and limit <= 0:
        raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
    if split is not None and split not in SPLITS:
        raise ValueError(f"PopQA has no {split!r} split: choose 'dev' (evaluation), 'train' "
                         f"(learning) or None (every question); see eval_sets/popqa/README.md")
    rows = read_jsonl(path)
    if split is not None:
        keep = load_split()[split]
        rows = [row for row in rows if row.get("id") in keep]
    rows = round_robin_order(rows, seed=seed)
    if limit is not None:
        rows = rows[:limit]
    return [{k: row.get(k) for k in _FIELDS} for row in rows]
