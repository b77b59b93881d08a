"""The labeled sources' training pairs: built from ``eval_sets/``, cached, and saved for ``program index``.

A source is PopQA (its ``train`` questions labeled by their answers, the offline web snapshot's
strips, synthetic MiniCheck-style support pairs from its training documents, and the claims a
generator makes of its answers) or a training domain of ``eval_sets.domains`` (its ``train``
grading rows and queries' retrieved chunks, strip rows and support rows). Every pair set is from a
training split. Building them (retrieval, strips, embeddings) is the slow part, so they are built
once per stamp (``<cache>/judge-sources/<stamp>.pkl``) and combined at will
(``program.adaptation.fit.fit_judges``): the transfer run (``experiments.transfer``) fits with one
domain left out at a time.

``python -m optimize.training.sources --out compiled`` saves every source's pairs as
``compiled/labeled_pairs.npz`` (``program.adaptation.labeled``): what ``program index`` fits the
adapted judges on, so that the runtime reads no labeled set. ``python -m optimize.compile --kb
PATH_OR_URL`` adapts the judges to a knowledge base from here (:func:`main_for_kb`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pickle
import sys
from pathlib import Path

from eval_sets import popqa
from eval_sets.domains import DOMAINS, load_rows
from eval_sets.popqa import KNOWLEDGE_BASE_PATH, load_questions, read_jsonl
from optimize.training.pairs import (adversarial_passage_pairs, popqa_passage_pairs, popqa_strip_pairs,
                                     popqa_support_pairs, popqa_web_strip_pairs)
from program.adaptation.adapt import DEFAULT_QUESTIONS, DEFAULT_TIME_CAP, adapt_and_report
from program.adaptation.calibrate import popqa_expected
from program.adaptation.fit import SourcePairs
from program.adaptation.labeled import save_labeled
from program.adaptation.pairs import adversarial_strip_pairs, support_rows_pairs, synthetic_support_pairs
from program.app import resources
from program.atomic import write_atomic
from program.judgments import PASSAGE, STRIP, SUPPORT
from program.lm.model_files import cache_root
from program.retrieval import CorpusError, EmbeddingError, KnowledgeBaseError

ROOT = Path(__file__).resolve().parents[2]  # the project: eval_sets/, program/ and optimize/ are under it
# the code that turns labeled rows into pairs: a change builds them again
SOURCES_CODE = ["optimize/training/sources.py", "optimize/training/pairs.py", "program/adaptation/pairs.py",
                *(f"program/judgments/{name}.py" for name in ("base", "features", "passage", "strip", "support")),
                "program/question.py"]


def popqa_source(popqa_kb, embedder, web, log=print) -> SourcePairs:
    """PopQA's training pairs (``train`` questions only), as ``train_judges`` builds them."""

    train_q = load_questions(split="train")
    log(f"popqa: passage pairs of {len(train_q)} train questions")
    passage = popqa_passage_pairs(train_q, popqa_kb)
    log("popqa: strip pairs (knowledge base and web snapshot)")
    strip = popqa_strip_pairs(train_q, popqa_kb, embedder).extend(popqa_web_strip_pairs(train_q, web, embedder))
    log("popqa: synthetic support pairs and claims")
    docs = {r["doc_id"]: r["text"] for r in read_jsonl(KNOWLEDGE_BASE_PATH)}
    train_docs = [(q["id"], docs[q["id"].replace("popqa-", "kb-")]) for q in train_q
                  if q["id"].replace("popqa-", "kb-") in docs]
    support = synthetic_support_pairs(train_docs, embedder)
    claims = popqa_support_pairs(train_q, popqa_kb, embedder)
    _, expected, _ = popqa_expected(passage.groups, passage.labels, [0.0] * len(passage))
    return SourcePairs("popqa", popqa_kb, passage, strip, support, expected, claims)


def domain_source(name: str, kb, embedder, split: str = "train") -> SourcePairs:
    """A labeled domain's pairs from ``split`` (``train`` to learn from)."""

    queries = load_rows(name, "queries", split)
    passage = adversarial_passage_pairs(load_rows(name, PASSAGE.rows, split), queries, kb, embedder)
    strip = adversarial_strip_pairs(load_rows(name, STRIP.rows, split), embedder)
    support = support_rows_pairs(load_rows(name, SUPPORT.rows, split), embedder)
    expected = {r["id"]: r["expected_action"] for r in queries if r.get("needs_retrieval", True)}
    return SourcePairs(name, kb, passage, strip, support, expected)


def labeled_files(leave_out) -> list[Path]:
    """The labeled files the sources read: each kept training domain's JSONL rows and documents."""
    files = []
    for name, d in sorted(DOMAINS.items()):
        if name in leave_out or not d.trains:
            continue
        folder = ROOT / "eval_sets" / name
        files += sorted(folder.glob("*.jsonl")) + sorted(Path(d.kb_dir).rglob("*.md"))
    return files


def files_stamp(files, root: Path, salt: str = "") -> str:
    """sha256 (16 hex digits) of ``files``, each named by its path under ``root``: the same files
    in a clone at another place give the same stamp. A missing file counts as ``-``."""
    digest = hashlib.sha256(salt.encode())
    for path in map(Path, files):
        digest.update(path.resolve().relative_to(root).as_posix().encode())
        digest.update(path.read_bytes() if path.is_file() else b"-")
    return digest.hexdigest()[:16]


def sources_stamp(leave_out) -> str:
    """sha256 (16 hex digits) of what the labeled sources' pairs are made of: PopQA's files, the
    kept domains' files and the code; equal stamps give the same pairs, wherever the project is."""
    files = ([popqa.QUESTIONS_PATH, popqa.SPLIT_PATH, popqa.KNOWLEDGE_BASE_PATH, popqa.WEB_SNAPSHOT_PATH]
             + labeled_files(leave_out) + [ROOT / p for p in SOURCES_CODE])
    return files_stamp(files, ROOT, json.dumps(sorted(leave_out)))


def labeled_sources(leave_out=(), embedder=None, log=print) -> list[SourcePairs]:
    """PopQA's and the kept training domains' pairs, read from ``<cache>/judge-sources/<stamp>.pkl``
    when built before, else built (minutes) and cached; their knowledge bases detached."""
    path = cache_root() / "judge-sources" / f"{sources_stamp(leave_out)}.pkl"
    if path.exists():
        try:
            with open(path, "rb") as f:
                return pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError) as exc:
            log(f"the cached labeled pairs {path} are unreadable ({type(exc).__name__}); building them again")
    embedder = embedder or resources.embedder()
    sources = [popqa_source(resources.knowledge_base(), embedder, resources.web_backend("snapshot"), log=log)]
    for name, d in DOMAINS.items():
        if name not in leave_out and d.trains:  # a measuring domain's labels train no judge
            log(f"{name}: labeled training pairs")
            sources.append(domain_source(name, resources.knowledge_base(d.kb_dir), embedder))
    sources = [s.detached() for s in sources]
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, pickle.dumps(sources))  # a kill leaves no half-written cache
    return sources


def main_for_kb(args, parser) -> int:
    """``python -m optimize.compile --kb PATH_OR_URL [--leave-out NAMES] [--questions N] [--time-cap S]``:
    adapt and save; 0, or 2 with one line naming the problem."""

    leave_out = [n.strip() for n in (args.leave_out or "").split(",") if n.strip()]
    if unknown := sorted(set(leave_out) - set(DOMAINS)):
        parser.error(f"--leave-out: unknown domain(s) {', '.join(unknown)}; choose from {', '.join(sorted(DOMAINS))}")
    questions = DEFAULT_QUESTIONS if args.questions is None else args.questions
    time_cap = DEFAULT_TIME_CAP if args.time_cap is None else args.time_cap
    if questions < 0 or time_cap <= 0:
        parser.error("--questions must be 0 or more and --time-cap positive")
    try:
        kb = resources.knowledge_base(args.kb)
    except (CorpusError, KnowledgeBaseError, EmbeddingError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return adapt_and_report(kb, args.out, name=str(args.kb), leave_out=leave_out, questions=questions,
                            time_cap=time_cap, force=args.force, model=args.model, api_base=args.api_base)



def main(argv: list[str] | None = None) -> int:
    """``python -m optimize.training.sources [--out compiled]``: build (or read from the cache) every
    labeled source's pairs and save them as ``<out>/labeled_pairs.npz``."""
    parser = argparse.ArgumentParser(prog="python -m optimize.training.sources", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="compiled", help="the compiled folder to save labeled_pairs.npz into")
    args = parser.parse_args(argv)
    sources = labeled_sources()
    path = save_labeled(sources, args.out, sources_stamp(()))
    print(f"saved {path}: " + ", ".join(f"{s.name} ({len(s.passage)} passage, {len(s.strip)} strip, "
                                         f"{len(s.support)} support)" for s in sources))
    return 0


__all__ = ["domain_source", "files_stamp", "labeled_sources", "main", "main_for_kb", "popqa_source", "sources_stamp"]


if __name__ == "__main__":
    sys.exit(main())
