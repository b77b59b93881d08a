"""One metric per compiled predictor, each ``metric(example, prediction, trace=None) -> float`` in [0, 1].

DSPy optimizers call these with a labeled ``dspy.Example`` and the predictor's output.
"""

from __future__ import annotations

import functools
import re
from pathlib import PurePath

from program.stages.decision import evaluator_action
from program.stages.attribution import answer_sentences, citation_quality
from program.stages.evaluator import score_grade
from program.stages.generation import cited_numbers
from program.stages.refine import score_span
from program.stages.selfcheck import (RANKED_VERDICTS, evidence_sentences, is_abstention, judge_support,
                                      lexical_support, strip_citations)
from program.text import content_words, coverage, without_footnotes
from program.types import AnswerSentence, Strip

_CITATION = re.compile(r"\[\d+\]")
_NUMBERED = re.compile(r"^\[(\d+)\]\s*")


LM_LOWER, LM_UPPER = 0.2, 0.6  # the LM grader's thresholds: a passage's score -> its action band (CRAG §4.3)


def grading_metric(example, pred, trace=None) -> float:
    """Action-band accuracy of GradeRetrieval (half credit for the right band with the wrong category)."""
    score, reason = score_grade(pred.same_entity, pred.answers_question, pred.outdated)
    band = evaluator_action(float(example.relevance), LM_LOWER, LM_UPPER)
    if evaluator_action(score, LM_LOWER, LM_UPPER) != band:
        return 0.0
    return 1.0 if reason == example.reason else 0.5


def kept_strip(example, pred, threshold: float = 0.5) -> bool:
    """Whether the refiner would keep the example's strip from StripRelevance's output."""
    return score_span(str(getattr(pred, "answer_span", "") or ""), example.strip) >= threshold


def strip_accuracy(example, pred, trace=None) -> float:
    """1.0 when the strip is kept exactly when it is labeled relevant (``relevant``: bool)."""
    return float(kept_strip(example, pred) == bool(example.relevant))


def rewrite_recall(example, pred, trace=None) -> float:
    """Share of the labeled expert terms that appear in the rewritten query (case-insensitive)."""
    terms = [t.lower() for t in example.expert_terms]
    query = str(getattr(pred, "query", "") or "").lower()
    return sum(t in query for t in terms) / len(terms) if terms else 1.0


def support_accuracy(example, pred, trace=None) -> float:
    """1.0 when the verdict from the model's quote (``judge_support``) equals the label."""
    return float(judge_support(example.claim, str(pred.quote), example.evidence) == example.support)


def decision_accuracy(example, pred, trace=None) -> float:
    """1.0 when DecideRetrieval's ``needs_retrieval`` equals the label (output it cannot parse
    as a boolean counts as True, as in ``CRAG``: only a parsed "false" skips retrieval)."""
    return float((getattr(pred, "needs_retrieval", True) is not False) == bool(example.needs_retrieval))


def answer_metric(example, pred, trace=None) -> float:
    """Answer correctness: a gold string in the answer; for unanswerable items, an abstention."""
    answer = str(getattr(pred, "answer", "") or "")
    golds = [g.lower() for g in example.gold_answers]
    if any("don't know" in g for g in golds):
        return float(is_abstention(answer))
    return float(any(g in answer.lower() for g in golds))


def answer_grounded(example, pred, min_coverage: float = 0.6) -> bool:
    """Whether the answer's content words come from its context (share >= ``min_coverage``).

    A lexical proxy for groundedness, cheap enough to run inside an optimizer; an abstention
    counts as grounded (it claims nothing).
    """
    answer = _CITATION.sub(" ", str(getattr(pred, "answer", "") or ""))
    if is_abstention(answer):
        return True
    return coverage(answer, " ".join(example.context)) >= min_coverage


def context_strips(example) -> list[Strip]:
    """The example's numbered context (``["[1] text", ...]``) as strips, ``[1]`` first."""
    return [Strip(f"context-{i}", 0, _NUMBERED.sub("", str(text), count=1))
            for i, text in enumerate(example.context, start=1)]


def written_citations(example, pred, judges=None) -> tuple[float | None, float | None]:
    """ALCE's citation recall and precision (Gao et al. 2023 §2.3) of the ``[n]`` markers the
    generator wrote itself, judged as the program's attribution judges them (``judges``: a
    ``JudgeSet`` whose trained support judge scores; None: the word-overlap verdict). No LM
    call, cheap enough for an optimizer. The program's attribution (``program.stages.attribution``)
    fixes missing or wrong markers at run time; this scores what the model did before that fix.

    Returns:
        ``(recall, precision)`` in [0, 1]; ``(None, None)`` for an abstention (it states
        nothing); precision None when the answer cites nothing (recall is then 0).
    """
    answer = str(getattr(pred, "answer", "") or "")
    if is_abstention(answer):
        return None, None
    strips = context_strips(example)
    sentences = [AnswerSentence(strip_citations(s), cited_numbers(s, len(strips)))
                 for s in answer_sentences(answer)]
    return citation_quality(example.question, sentences, strips, judges)


def answer_citation_metric(example, pred, trace=None, judges=None) -> float:
    """Generation, with citations rewarded (the citations issue; ALCE §2.3).

    0 for a wrong answer. A right one scores 0.5, plus 0.25 when grounded in the context
    (``answer_grounded``) and 0.25 times its own markers' citation recall times precision
    (``written_citations``; an answer citing nothing gets none of it). A right abstention
    scores 1.0: it states nothing to cite. With the compile's demo threshold of 0.99 only
    right, grounded answers whose every sentence cites a strip that supports it become demos.
    ``judges``: as for ``written_citations`` (:func:`answer_citation_metric_for` binds them).
    """
    if not answer_metric(example, pred, trace):
        return 0.0
    recall, precision = written_citations(example, pred, judges)
    if recall is None:
        return 1.0
    cited = recall * (precision or 0.0)
    return 0.5 + 0.25 * answer_grounded(example, pred) + 0.25 * cited


def answer_citation_metric_for(judges):
    """:func:`answer_citation_metric` with citations judged by ``judges`` (the trained judges
    the compiled program cites with), as DSPy's optimizers call a metric: ``(example, pred, trace)``."""

    def metric(example, pred, trace=None) -> float:
        return answer_citation_metric(example, pred, trace, judges)

    return metric


def cited_answer(example) -> str:
    """The labeled demo answer, citing the first strip that states a gold answer (or key fact)
    with its ``[n]`` before the full stop. An encyclopedia item (PopQA's, ``source`` "popqa:…")
    is answered by the entity, as PopQA's answers are: "Olaf Holtedahl [2]."; a help-centre
    item by the strip's sentence that states it: "A session expires after 24 hours if the
    customer does not pay [3].". "I don't know." for an item whose context does not answer
    it, or when no strip states a gold answer."""
    golds = [g for g in (list(example.gold_answers) + list(getattr(example, "key_facts", None) or [])) if g]
    if any("don't know" in g.lower() for g in example.gold_answers):
        return "I don't know."
    entity = str(getattr(example, "source", "")).startswith("popqa")
    for gold in golds:
        for n, strip in enumerate(context_strips(example), start=1):
            for sentence in evidence_sentences(strip.text):
                found = re.search(rf"\w*{re.escape(gold)}\w*", sentence, re.I)
                if found:
                    return f"{found.group(0) if entity else sentence.rstrip(' .')} [{n}]."
    return "I don't know."


def with_cited_answers(examples: list) -> list:
    """The answer examples as the program sees them and as a cited demo shows them: each
    context strip without its source's footnote markers (``without_footnotes``: a "[1]" left
    in a strip reads as a citation), and ``answer`` set to :func:`cited_answer`, so that a
    labeled demo teaches the ``[n]`` markers."""
    out = []
    for example in examples:
        context = [f"[{i}] {without_footnotes(_NUMBERED.sub('', str(c), count=1)).strip()}"
                   for i, c in enumerate(example.context, start=1)]
        updated = example.copy(context=context)
        out.append(updated.copy(answer=cited_answer(updated)))
    return out


def doc_of(passage_id: str) -> str:
    """The document a chunk id belongs to: ``"kb/fees.md#2"`` -> ``"fees"``."""
    return PurePath(passage_id.split("#", 1)[0]).stem


def rewrite_metric_for(knowledge_base, k: int = 3):
    """The rewriting metric: half expert-term recall, half retrieval recall at ``k``.

    Retrieval recall is 1.0 when a document in ``example.relevant_doc_ids`` is among the top
    ``k`` chunks ``knowledge_base.search(query, k)`` returns for the rewritten query (the
    rewrite should find what the question alone might not); rows without relevant ids count
    only the terms. The examples carry the candidate terms the rewrite was given
    (:func:`with_candidate_terms`), as in the program.
    """

    def rewrite_metric(example, pred, trace=None) -> float:
        terms = rewrite_recall(example, pred)
        relevant = set(getattr(example, "relevant_doc_ids", None) or [])
        if not relevant or knowledge_base is None:
            return terms
        return 0.5 * terms + 0.5 * rewrite_retrieval_hit(knowledge_base, example, pred, k)

    return rewrite_metric


def with_candidate_terms(examples, knowledge_base, n: int = 12) -> list:
    """The rewrite examples with ``candidate_terms`` added as an input: the knowledge base's
    ``n`` terms nearest to each question (``KnowledgeBase.candidate_terms``), as ``RewriteQuery``
    receives them in the program. The compile passes the adversarial knowledge base
    (:func:`adversarial_knowledge_base`) for every rewrite row, PopQA rows included: their
    candidates then name nothing about the asked entity, and the rewrite must fall back on the
    entity's name.

    Args:
        examples: ``dspy.Example`` objects with ``question`` among their inputs.
        knowledge_base: an object with ``candidate_terms(question, n) -> list[str]``.
        n: candidates per question.

    Returns:
        New examples (the given ones are not changed), inputs ``question`` and ``candidate_terms``
        (plus any other input they had), every label kept.
    """
    return [e.copy(candidate_terms=list(knowledge_base.candidate_terms(e.question, n)))
            .with_inputs(*dict.fromkeys([*e.inputs().keys(), "candidate_terms"]))
            for e in examples]


@functools.lru_cache(maxsize=1)
def adversarial_knowledge_base():
    """The adversarial set's Paylane knowledge base (``eval_sets/adversarial/kb/``), built or
    reused once per process (``program.app.resources.knowledge_base``)."""
    from eval_sets.adversarial import KB_DIR
    from program.app.resources import knowledge_base

    return knowledge_base(KB_DIR)


def rewrite_retrieval_hit(knowledge_base, example, pred, k: int = 3) -> float:
    """1.0 when the rewritten query retrieves a relevant document in the top ``k``."""
    relevant = set(getattr(example, "relevant_doc_ids", None) or [])
    query = str(getattr(pred, "query", "") or "").strip()
    if not query:
        return 0.0
    found = {doc_of(p.id) for p in knowledge_base.search(query, k)}
    return float(bool(relevant & found))


def strip_f1(results) -> dict:
    """Precision, recall and F1 of keeping relevant strips over ``(example, pred, score)`` rows, one strip each."""
    tp = fp = fn = 0
    for example, pred, _ in results:
        kept, relevant = kept_strip(example, pred), bool(example.relevant)
        tp += kept and relevant
        fp += kept and not relevant
        fn += (not kept) and relevant
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def _mean(values) -> float:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else 0.0


def _ok(results) -> list:
    """The ``(example, prediction)`` rows whose prediction parsed."""
    return [(e, p) for e, p, _ in results if p is not None and hasattr(p, "keys")]


def _scores(results) -> list[float]:
    return [float(s) for _, _, s in results]


# The figures a predictor is judged by on a split, one function per predictor, each
# ``figures(results, knowledge_base=None) -> {"primary": float in [0, 1], ...named figures}``
# over ``dspy.Evaluate``'s ``(example, prediction, score)`` rows; ``PredictorSpec.figures``
# (``optimize.compile``) and the judgments' training records (``optimize.training.records``) name them.


def grading_figures(results, knowledge_base=None) -> dict:
    """Grading: the metric (primary: band with half credit for the reason), action-band accuracy, reason accuracy."""
    scores = _scores(results)
    return {"primary": _mean(scores), "band_accuracy": _mean(s > 0 for s in scores),
            "reason_accuracy": _mean(s == 1.0 for s in scores)}


def strip_figures(results, knowledge_base=None) -> dict:
    """Strips: accuracy, precision, recall and F1 of the strips kept (primary: F1)."""
    f = strip_f1([(e, p, s) for (e, p, s) in results if p is not None])
    return {"primary": f["f1"], "accuracy": _mean(_scores(results)), **f}


def rewrite_figures(results, knowledge_base=None) -> dict:
    """Rewriting: term recall, retrieval recall at 3 (with a knowledge base), primary their mean."""
    preds_ok = _ok(results)
    terms = _mean(rewrite_recall(e, p) for e, p in preds_ok)
    out = {"term_recall": terms}
    if knowledge_base is not None:
        with_ids = [(e, p) for e, p in preds_ok if getattr(e, "relevant_doc_ids", None)]
        out["retrieval_recall_at_3"] = _mean(rewrite_retrieval_hit(knowledge_base, e, p) for e, p in with_ids)
    out["primary"] = _mean(out.values())
    return out


def answer_figures(results, knowledge_base=None) -> dict:
    """Answers: the metric (primary), correctness, groundedness and the citations' share, recall, precision."""
    preds_ok = _ok(results)
    cited = [written_citations(e, p) for e, p in preds_ok]
    return {"primary": _mean(_scores(results)), "correctness": _mean(answer_metric(e, p) for e, p in preds_ok),
            "groundedness": _mean(answer_grounded(e, p) for e, p in preds_ok),
            "cited_share": _mean(p is not None for r, p in cited if r is not None),
            "citation_recall": _mean(r for r, _ in cited if r is not None),
            "citation_precision": _mean(p for _, p in cited if p is not None)}


def support_figures(results, knowledge_base=None) -> dict:
    """Support: the quote's verdict accuracy (primary), the self-check's, word overlap's, the quote ceiling."""
    # What the self-check decides (the better of the word-overlap and the quoted verdict),
    # the word-overlap verdict alone, and the best the self-check could do whatever one
    # sentence (or NONE) the model quoted.
    def decided(e, quote):
        return max(lexical_support(e.claim, e.evidence), judge_support(e.claim, quote, e.evidence),
                   key=RANKED_VERDICTS.index)

    scores = _scores(results)
    rows = [(e, str(getattr(p, "quote", "") or "")) for e, p, _ in results]
    return {"primary": _mean(scores), "accuracy": _mean(scores),
            "program_accuracy": _mean(decided(e, q) == e.support for e, q in rows),
            "word_overlap_accuracy": _mean(lexical_support(e.claim, e.evidence) == e.support for e, _ in rows),
            "quote_ceiling": _mean(any(decided(e, s) == e.support
                                       for s in evidence_sentences(e.evidence) + ["NONE"]) for e, _ in rows)}


def decision_figures(results, knowledge_base=None) -> dict:
    """Deciding: accuracy (primary: each wrong decision costs about one answer, since a needless
    skip answers a question that needs sources closed-book and a missed chit-chat question goes
    through CRAG, which answers it from unrelated strips), the balanced accuracy (the mean of the
    share of questions needing sources that retrieve and the share of chit-chat that skips), and
    the counts of needless skips and of right skips."""
    rows = [(bool(e.needs_retrieval), p is not None and getattr(p, "needs_retrieval", True) is False)
            for e, p, _ in results]
    need = [not skipped for needs, skipped in rows if needs]
    chat = [skipped for needs, skipped in rows if not needs]
    recalls = [_mean(x) for x in (need, chat) if x]
    scores = _scores(results)
    return {"primary": _mean(scores), "accuracy": _mean(scores), "balanced_accuracy": _mean(recalls),
            "needless_skips": sum(not x for x in need), "right_skips": sum(chat),
            "needs_retrieval": len(need), "chit_chat": len(chat)}


def standalone_overlap(example, pred, trace=None) -> float:
    """StandaloneQuestion against the question written by hand: the F1 of their content words
    (``program.text.content_words``), so a rewrite that names what the hand-written one names and
    adds nothing else scores 1.0; one that repeats the follow-up unchanged scores what the two share."""
    got = content_words(str(getattr(pred, "standalone_question", "") or ""))
    want = content_words(example.standalone_question)
    shared = len(got & want)
    return 0.0 if not shared else 2 * shared / (len(got) + len(want))


def standalone_figures(results, knowledge_base=None) -> dict:
    """Follow-ups: the mean content-word F1 (primary), and the share of rows whose rewrite names
    every content word the hand-written question adds to the follow-up (what the conversation
    had to supply: "containerlogmaxsize" for "the first one")."""
    filled = []
    for example, pred, _ in results:
        added = content_words(example.standalone_question) - content_words(example.followup)
        got = content_words(str(getattr(pred, "standalone_question", "") or "")) if pred is not None else set()
        filled.append(float(added <= got))
    scores = _scores(results)
    return {"primary": _mean(scores), "f1": _mean(scores), "filled": _mean(filled), "rows": len(scores)}
