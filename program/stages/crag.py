"""The CRAG program: Corrective RAG (Yan et al. 2024) with Self-RAG's support checks (Asai et al. 2023).

``forward`` follows the paper's algorithm with the reader's draft as evidence: retrieve,
evaluate (cheap judges, no LM call), draft (the one call plain RAG makes), decide the action
from the scores and the draft's checks, correct when the draft does not hold up, then check
every claim (self-crag) and cite. Optionally it first asks Self-RAG's "retrieve or not"
question and answers closed-book when no retrieval is needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, replace

import dspy
from dspy.utils.exceptions import AdapterParseError

from program.guards.caps import CapReached, QuestionCaps, guarded
from program.guards.cost import step
from program.judges.judgments import JUDGMENTS, PASSAGE
from program.guards.question import MAX_QUESTION_CHARS, QuestionError, validate_question  # noqa: F401 - public here too
from program.lm.adapter import inputs_as_data
from program.lm.continuation import Reading, RecordingChatAdapter, continuing, recorded_reading
from program.lm.configure import CRITIQUE_CONFIG
from program.retrieval.fusion import fuse_passages
from program.stages.attribution import Attribution, Attributor
from program.stages.decision import Decider, Decision, unmentioned_reason
from program.stages.draft import ConfidenceModel, Draft, DraftEvidence, asked_names, asked_times, check_draft
from program.stages.evaluator import RetrievalEvaluator
from program.stages.followup import FollowUp
from program.stages.generation import AnswerGenerator
from program.stages.instructions import InstructionFilter
from program.stages.refine import KnowledgeRefiner
from program.stages.selfcheck import ClaimChecker, is_abstention, strip_citations
from program.stages.settings import DEFAULT_ACCEPT, DEFAULT_VERIFY_BAND, CRAGSettings  # noqa: F401 - public here too
from program.stages.stale import is_set_aside, set_aside_stale
from program.stages.usefulness import UsefulnessJudge
from program.stages.verdict import SELF_CHECK, VERIFY, Checked, Corrected, Verdict, chosen, claim_check, verdict
from program.stages.web_path import WebSearcher
from program.types import (FALLBACK_ANSWER, Action, ChunkGrade, Claim, Correction, CRAGResult, Passage, Strip,
                           Trace)
from signatures import AnswerClosedBook, DecideRetrieval

# What DSPy raises for output it cannot parse (several types); a failing LM service, a cap or a
# cancellation are not among them and still end the question.
UNREADABLE_OUTPUT = (AdapterParseError, ValueError, KeyError, TypeError, AttributeError)


class CRAG(dspy.Module):
    """Corrective RAG with the reader's draft as evidence and a claim-level self-check, as one DSPy module.

    Args:
        knowledge_base: object with ``search(query, k) -> list[Passage]`` (``program.retrieval.KnowledgeBase``);
            with ``mentions(terms)`` too, a question about a name it never writes is declined.
        web: a search backend for the INCORRECT and AMBIGUOUS actions, or None (no web).
        embedder: used by the refiner to pre-filter web strips; None grades every strip.
        judges: a ``program.judges.JudgeSet`` (``load_compiled`` loads the compiled one): the
            trained passage, strip and support judges; None scores passages by retrieval
            similarity and judges strips and claims with the LM Signatures.
        confidence: the ``program.stages.draft.ConfidenceModel`` that scores an answer's checks;
            the default weights when None.
        settings: ``program.stages.settings.CRAGSettings`` (k, thresholds, operating point, claim
            check, retries, retrieve-or-not, caps, ...); the defaults when None.
        **overrides: fields of ``settings`` to replace, by name (``CRAG(kb, k=5, self_check=False)``).

    Raises:
        ValueError: a setting out of its range (``CRAGSettings``).
        TypeError: a keyword that names no setting.

    The route (CRAG §4.3, with the draft as evidence):
        1. retrieve ``k`` passages; set aside sentences addressing the model; score each passage
           (trained judge, no LM call) and set aside stale ones;
        2. **draft**: one generation over the passages as plain RAG reads them (or their
           refined strips, ``refine_passages``), with the answer's token probabilities from the
           same call; its checks and confidence (``program.stages.draft``);
        3. **decide** (``program.stages.decision.decide``): CORRECT when the draft holds up (it is
           the answer, no further call); INCORRECT when nothing holds (it abstains, or its words
           or the question's premise are not in its sources, or the question names what the
           knowledge base never writes); AMBIGUOUS otherwise;
        4. INCORRECT and AMBIGUOUS take the **correction** once: ``RewriteQuery`` in the knowledge
           base's vocabulary, the knowledge base searched again and the web (when configured),
           web pages refined into strips; the answer is written again from what was found
           (AMBIGUOUS: plus the draft's cited passages), and the answer of higher confidence kept;
           a question naming what the knowledge base never writes skips it when no web is
           configured (searching the same documents again cannot find the name);
        5. the **claim check** of the answer kept (``program.stages.verdict.claim_check``): crag
           checks an answer below ``accept + verify_band``, self-crag every answer, with one
           stricter retry for unsupported claims (kept only when its claims hold up at least as well);
           each check continues the reader's call (``program.lm.continuation``), so the prompt
           cache serves the strips the answer was written from;
        6. the **verdict** (``program.stages.verdict.verdict``, one pure function of the values
           above): an answer that does not hold up, or whose claims all fail, is declined
           (``FALLBACK_ANSWER``, ``result.fallback``, the reason in ``result.reason``); otherwise
           it is given without its unsupported claims, and cited. The result is built once from it.

    Edge behaviour: an abstaining draft has confidence 0 and goes to the correction; a
    correction that finds nothing leaves the draft's confidence to decide. A question that
    reaches its time, token or LM-call cap (``caps``, a ``program.guards.caps.QuestionCaps``;
    default from the environment) stops before its next step with the fallback, the cap in
    ``trace.caps_hit``. ``forward`` raises only ``QuestionError`` for a bad question and
    ``program.lm.retry.LMServiceError`` when the LM service failed after its capped retries.

    Example:
        >>> program = CRAG(KnowledgeBase.load(".cache/indexes/popqa"), web=OfflineSnapshotBackend(path))
        >>> result = program(question="What is Herlyn Espinal's occupation?")
        >>> result.action, result.confidence, result.answer
    """

    def __init__(self, knowledge_base, web=None, *, embedder=None, judges=None,
                 confidence: ConfidenceModel | None = None, settings: CRAGSettings | None = None,
                 sources: dict[str, str] | None = None, **overrides):
        super().__init__()
        self.settings = replace(settings or CRAGSettings(), **overrides)
        self.sources = dict(sources or {})  # where each resolved value came from (ProgramConfig.sources)
        caps = self.settings.caps
        self.knowledge_base = knowledge_base
        self.embedder = embedder
        self.confidence = confidence or ConfidenceModel()
        self.decider = dspy.Predict(DecideRetrieval) if self.settings.decide_retrieval else None
        self.closed_book = dspy.Predict(AnswerClosedBook) if self.settings.decide_retrieval else None
        # the trained judges go to each stage that scores with them, once, here
        self.evaluator = RetrievalEvaluator(judges=judges, probabilities=self.settings.probabilities)
        self.action_decider = Decider()
        self.instruction_filter = InstructionFilter()
        self.refiner = KnowledgeRefiner(embedder, max_strips=caps.strips if caps else 4, judges=judges)
        self.web_searcher = WebSearcher(web, k=caps.web_pages if caps else self.settings.web_k)
        self.followup = FollowUp()
        self.generator = AnswerGenerator()
        self.checker = ClaimChecker(max_claims=caps.claims if caps else 8, judges=judges)
        self.usefulness = UsefulnessJudge(judges=judges)
        self.attributor = Attributor(judges=judges)

    def narrowed(self, settings: CRAGSettings, *, web: bool = True) -> "CRAG":
        """This program as one request may run it: a new ``CRAG`` built with ``settings`` (and no
        web when ``web`` is False) around the same knowledge base, embedder, judges and confidence
        model, its predictors loaded with this one's compiled state. ``self`` is left as it was
        (the service answers several requests at once, ``program.app.service.runner``)."""
        view = CRAG(self.knowledge_base, web=self.web_searcher.backend if web else None, embedder=self.embedder,
                    judges=self.judges, confidence=self.confidence, settings=settings, sources=self.sources)
        compiled = dict(self.named_predictors())
        for name, predictor in view.named_predictors():
            if name in compiled:
                predictor.load_state(compiled[name].dump_state())
        return view

    @property
    def judges(self):
        """The trained judges (``program.judges.JudgeSet``) the evaluator, refiner, checker,
        usefulness judge and attributor were built with; None when there are none."""
        return self.evaluator.judges

    def judges_report(self) -> dict:
        """Who decides each judgment (``program.judges.JudgeSet.report``); with no trained judges,
        the LM decides all of them and nothing was adapted."""
        if self.judges is None:
            return {"judgments": {name: "similarity" if j is PASSAGE else "lm" for name, j in JUDGMENTS.items()},
                    "adapted": False, "corpus": "", "calibrated_here": False}
        report = self.judges.report()
        # CRAG never asks the LM to grade a passage (``_evaluate``): say what scores them
        report["judgments"] = {**report["judgments"],
                               PASSAGE.name: "trained" if self.judges.has(PASSAGE) else "similarity"}
        return report

    @property
    def decide_retrieval(self) -> bool:
        """True when ``forward`` first asks whether the question needs retrieval at all."""
        return self.settings.decide_retrieval and self.decider is not None

    @property
    def mode(self) -> str:
        """The evaluation mode this program plays: ``self-crag`` with the claim check, else ``crag``."""
        return "self-crag" if self.settings.self_check else "crag"

    def forward(self, question: str, history: Sequence[tuple[str, str]] = ()) -> CRAGResult:
        """Answer ``question``; ``history`` is the conversation before it (``(role, text)`` pairs,
        ``user`` or ``assistant``, oldest first), whose follow-up is first rewritten into a
        standalone question (``program.stages.followup``; ``result.asked`` keeps the user's words)."""
        asked = validate_question(question)
        trace = Trace(judges=self.judges_report())
        with guarded(self.settings.caps or QuestionCaps.from_env()) as guard, inputs_as_data(RecordingChatAdapter):
            try:
                question = self._standalone(asked, history, trace)
                result = self._forward(question, trace)
            except CapReached as cap:  # bounded work (program.guards.caps): stop with the honest fallback
                trace.note(f"stopped: {cap}; honest fallback")
                result = CRAGResult(question=asked, answer=FALLBACK_ANSWER, trace=trace, fallback=True, mode=self.mode,
                                    declined_because=f"stopped: {cap}", reason=f"stopped: {cap}")
            finally:
                trace.caps_hit.extend(guard.caps_hit)
        return replace(result, asked=asked) if result.question != asked else result

    def _standalone(self, asked: str, history: Sequence[tuple[str, str]], trace: Trace) -> str:
        """The follow-up ``asked`` as a standalone question (no LM call without an earlier user turn)."""
        if not any(role == "user" for role, _ in history):
            return asked
        with step(trace, "followup"):
            question = self.followup(history=list(history), followup=asked)
        trace.note(f"follow-up {asked!r} read as {question!r}")
        return question

    def _forward(self, question: str, trace: Trace) -> CRAGResult:
        if self.decide_retrieval and not self._needs_retrieval(question, trace):
            return self._answer_closed_book(question, trace)
        passages, grades, unknown = self._retrieve(question, trace)
        draft = self._write(question, self._read(question, passages, grades, trace, "refine"), grades, trace,
                            "draft", unknown)
        decision = self._decide(draft, grades, trace)
        corrected = None if decision.action is Action.CORRECT else self._correct(question, passages, draft, decision,
                                                                               grades, trace, unknown)
        checked = self._check(question, chosen(draft, corrected), trace)
        outcome = verdict(draft, decision, corrected, checked, self.settings)
        return self._result(question, outcome, draft, grades, corrected, trace)

    def _retrieve(self, question: str, trace: Trace) -> tuple[list[Passage], list[ChunkGrade], set[str]]:
        """``(passages, grades, unknown names)``: retrieval, the instruction filter, the cheap judges."""
        with step(trace, "retrieve"):
            passages = self.knowledge_base.search(question, self.settings.k)
        passages = self._set_aside(passages, trace)
        unknown = self._unknown_names(question, trace)
        return passages, self._evaluate(question, passages, trace, "evaluate"), unknown

    def _correct(self, question: str, passages: list[Passage], draft: Draft, decision: Decision,
                 grades: list[ChunkGrade], trace: Trace, unknown: set[str]) -> Corrected:
        """CRAG's correction and the answer written again from what it found (AMBIGUOUS: with the
        draft's cited strips). A question naming what the knowledge base never writes skips it when
        no web is configured: searching the same documents again cannot find the name."""
        if draft.evidence.unmentioned and self.web_searcher.backend is None:
            skipped = f"{unmentioned_reason(draft.evidence.unmentioned)} and no web is configured: no correction"
            trace.note(skipped)
            return Corrected(skipped=skipped)
        correction = self._search_again(question, passages, trace)
        if not correction.strips:
            return Corrected(correction)
        kept = draft.cited_strips() if decision.action is Action.AMBIGUOUS else []
        again = self._write(question, kept + correction.strips, grades + correction.grades, trace, "generate", unknown)
        trace.note(f"draft {draft.confidence:.2f}, corrected answer {again.confidence:.2f}: kept the "
                   f"{'corrected answer' if chosen(draft, Corrected(correction, again)) is again else 'draft'}")
        return Corrected(correction, again)

    def _check(self, question: str, answer: Draft, trace: Trace) -> Checked | None:
        """The claim check ``claim_check`` gives ``answer``: crag's ``_verify``, self-crag's
        ``_check_claims``, or none."""
        kind = claim_check(answer, self.settings)
        if kind == VERIFY:
            return self._verify(question, answer, trace)
        return self._check_claims(question, answer, trace) if kind == SELF_CHECK else None

    def _result(self, question: str, outcome: Verdict, draft: Draft, grades: list[ChunkGrade],
                corrected: Corrected | None, trace: Trace) -> CRAGResult:
        """The ``CRAGResult`` of ``outcome``, built once: the answer cited when one is given."""
        trace.note(outcome.note())
        cited = None if outcome.fallback else self._cite(question, outcome, trace)
        return CRAGResult(
            question=question, answer=cited.answer if cited else outcome.answer, action=outcome.action,
            confidence=outcome.confidence, draft=draft.answer, draft_checks=asdict(draft.evidence),
            declined=outcome.declined, declined_because=outcome.reason if outcome.fallback else "",
            answered_by=outcome.answered_by, reason=outcome.reason,
            citations=cited.citations if cited else [], sentences=cited.sentences if cited else [],
            grades=grades, strips=outcome.strips, claims=outcome.claims, fallback=outcome.fallback,
            retried=outcome.retried, usefulness=outcome.usefulness, trace=trace, mode=self.mode,
            corrected_grades=corrected.correction.grades if corrected else [])

    def _cite(self, question: str, outcome: Verdict, trace: Trace) -> Attribution:
        with step(trace, "cite") as cost:
            out = self.attributor(question=question, answer=outcome.answer, strips=outcome.strips)
            cost.notes = out.summary()
        return out

    def _write(self, question: str, strips: list[Strip], grades: list[ChunkGrade], trace: Trace,
               name: str, unknown: set[str] = frozenset()) -> Draft:
        """One generation over ``strips`` and its checks: a ``Draft`` with its confidence
        (``unknown``: the question's names the knowledge base never mentions)."""
        if not strips:
            return Draft("", [], DraftEvidence(abstained=True), 0.0)
        with step(trace, name) as cost, recorded_reading() as record:
            try:
                answer, probability = self.generator.draft(question=question, strips=strips)
            except UNREADABLE_OUTPUT as exc:  # what the reader wrote cannot be parsed: no answer
                answer, probability = "", None
                trace.note(f"{name}: unparseable output ({type(exc).__name__}); no answer written")
            scores = {g.passage_id: g.score for g in grades}
            evidence = check_draft(question, answer, strips, scores, probability, unknown)
            confidence = self.confidence.score(evidence)
            cost.notes = f"confidence {confidence:.2f}; {evidence.summary()}"
        # one parsed call: the claim check may continue it (program.lm.continuation)
        reading = record.reading if record.calls == 1 and answer else None
        return Draft(answer, strips, evidence, confidence, reading if self.settings.continue_reading else None)

    def _decide(self, draft: Draft, grades: list[ChunkGrade], trace: Trace) -> Decision:
        best_score = max((g.score for g in grades if not is_set_aside(g)), default=-1.0)
        with step(trace, "decide") as cost:
            decision = self.action_decider(evidence=draft.evidence, confidence=draft.confidence,
                                              best_score=best_score, accept=self.settings.accept,
                                              lower=self.settings.lower)
            cost.notes = decision.summary()
        trace.note(decision.summary())
        return decision

    def _unknown_names(self, question: str, trace: Trace) -> set[str]:
        """The question's names (``asked_names``) and years that the knowledge base never writes,
        and its spans into the future (``asked_times``: the passages may still write them)."""
        asked = asked_names(question) | asked_times(question)
        mentions = getattr(self.knowledge_base, "mentions", None)  # a bare search-only object mentions all
        if not asked or mentions is None:
            return set()
        unknown = asked - set(mentions({a for a in asked if " " not in a}))
        if unknown:
            trace.note(unmentioned_reason(sorted(unknown)))
        return unknown

    def draft_context(self, question: str, trace: Trace | None = None) -> tuple[list[Strip], list[ChunkGrade]]:
        """``(strips, grades)``: what the draft reads for ``question`` and the passages' grades,
        as ``forward`` computes them before the draft (retrieve, set aside, evaluate, read; no LM
        call). For tools that score drafts outside ``forward`` (the operating point, the
        confidence model's rows), so that they read what the program reads."""
        trace = trace if trace is not None else Trace()
        passages = self._set_aside(self.knowledge_base.search(question, self.settings.k), trace)
        grades = self._evaluate(question, passages, trace, "evaluate")
        return self._read(question, passages, grades, trace, "refine"), grades

    def _read(self, question: str, passages: list[Passage], grades: list[ChunkGrade], trace: Trace,
              name: str) -> list[Strip]:
        """What the reader reads of knowledge-base ``passages``: the passages whole, or with
        ``refine_passages`` their refined strips, none when no strip is kept (CRAG's
        *incorrect*: a strip judge that keeps an answering strip for nine questions in ten
        that have one found nothing here, so no draft is written from them)."""
        whole = self._as_read(passages, grades)
        if not self.settings.refine_passages or not whole:
            return whole
        usable = [(p, g) for p, g in zip(passages, grades) if not is_set_aside(g)]
        relevant = [g.passage_id for _, g in usable if g.score >= self.settings.upper]
        strips = self._refine(question, [p for p, _ in usable], relevant, trace, name)
        if not strips:
            trace.note(f"{name}: no strip of the passages is kept; nothing to read from them")
        return strips

    def _as_read(self, passages: list[Passage], grades: list[ChunkGrade]) -> list[Strip]:
        """The passages as plain RAG reads them, one context entry each (cut to ``max_chars``),
        without those set aside as stale."""
        return [Strip(p.id, 0, p.text[: self.settings.max_chars], url=p.url, title=p.title, page=p.page)
                for p, g in zip(passages, grades) if not is_set_aside(g)]

    def _needs_retrieval(self, question: str, trace: Trace) -> bool:
        # Self-RAG's Retrieve token. Only a parsed "false" skips retrieval: skipping a question
        # that needed sources costs an ungrounded answer, retrieving for chit-chat a few calls.
        with step(trace, "decide-retrieval"):
            try:
                needed = self.decider(question=question, config=CRITIQUE_CONFIG).needs_retrieval
            except Exception as exc:  # adapter parse failures surface as several exception types
                needed = True
                trace.note(f"decide-retrieval: unparseable output ({type(exc).__name__}); retrieving")
        if needed is False:
            trace.note("decide-retrieval: no retrieval needed; answering closed-book")
            return False
        return True

    def _answer_closed_book(self, question: str, trace: Trace) -> CRAGResult:
        with step(trace, "answer-closed-book"):
            answer = str(self.closed_book(question=question).answer).strip()
        return CRAGResult(question=question, answer=answer, action=None, trace=trace, retrieval_skipped=True,
                          mode=self.mode)

    def _set_aside(self, passages: list[Passage], trace: Trace) -> list[Passage]:
        # Sentences addressing the model are not knowledge: out before any judge reads them.
        out = self.instruction_filter(passages=passages)
        for passage_id, sentence in out.removed:
            trace.note(f"{passage_id}: set aside a sentence addressing the model: {sentence[:200]!r}")
        return out.passages

    def _evaluate(self, question: str, passages: list[Passage], trace: Trace, name: str) -> list[ChunkGrade]:
        # The cheap judges only: an LM grade per passage costs what the whole draft costs.
        with step(trace, name) as cost:
            grades = self.evaluator(question=question, passages=passages, lower=self.settings.lower,
                                    upper=self.settings.upper, ask_lm=False)
            grades = set_aside_stale(passages, grades, self.settings.lower)
            cost.notes = "; ".join(f"{g.passage_id}={g.score} {g.reason}" for g in grades)
        for g in grades:
            if is_set_aside(g):
                trace.note(f"{g.passage_id}: {g.explanation}")
        return grades

    def _search_again(self, question: str, passages: list[Passage], trace: Trace) -> Correction:
        """CRAG's knowledge correction, one round (§4.3): rewrite in the knowledge base's
        vocabulary, search the knowledge base again and the web, judge what was found. New
        knowledge-base passages are read as the draft's were (``_read``); web pages are refined
        into strips (decompose-then-recompose pays where a page is long)."""
        terms = self._candidate_terms(question, trace)
        with step(trace, "rewrite") as cost:
            query = self.web_searcher.rewrite_query(question, terms)
            cost.notes = f"query={query!r}; candidate terms {terms}"
        trace.rewritten_query = query
        seen = {p.id for p in passages}
        with step(trace, "re-retrieve") as cost:
            # the rewrite adds to the question's results, never replaces them (fused by rank)
            found_kb = ([self.knowledge_base.search(q, 2 * self.settings.k) for q in (question, query)]
                        if query != question else [])
            again = [p for p in fuse_passages(found_kb) if p.id not in seen][:self.settings.k]
            cost.notes = f"{len(again)} new knowledge-base passages"
        found = []
        if self.web_searcher.backend is not None:
            with step(trace, "web-search") as cost:
                web = self.web_searcher(question=question, query=query)
                trace.web.append(web.to_trace())
                cost.notes = web.summary()
            if web.error:
                trace.note(f"web path failed: {web.error}")
            found = web.passages
        new = self._set_aside(again + found, trace)
        if not new:
            return Correction()
        grades = self._evaluate(question, new, trace, "evaluate-corrected")
        kept = [(p, g) for p, g in zip(new, grades) if not is_set_aside(g)]
        strips = self._read(question, [p for p, _ in kept if p.source != "web"],
                            [g for p, g in kept if p.source != "web"], trace, "refine-kb-corrected")
        pages = [p for p, _ in kept if p.source == "web"]
        relevant = [g.passage_id for p, g in kept if p.source == "web" and g.score >= self.settings.upper]
        return Correction(strips + self._refine(question, pages, relevant, trace, "refine-corrected"), grades)

    def _candidate_terms(self, question: str, trace: Trace) -> list[str]:
        terms = getattr(self.knowledge_base, "candidate_terms", None)
        try:
            terms = list(terms(question)) if callable(terms) else []
        except Exception:  # the vocabulary is a help, never a reason to fail
            return []
        kept, set_aside = self.instruction_filter.terms(terms)
        if set_aside:
            trace.note(f"set aside {len(set_aside)} candidate term(s) addressing the model: {set_aside}")
        return kept

    def _refine(self, question: str, passages: list[Passage], relevant_ids: list[str], trace: Trace,
                name: str) -> list[Strip]:
        if not passages:
            return []
        with step(trace, name) as cost:
            report = self.refiner(question=question, passages=passages, relevant_ids=relevant_ids)
            cost.notes = report.note
        return report.kept

    def _verify(self, question: str, answer: Draft, trace: Trace) -> Checked:
        """crag's claim check of an answer near the operating point: Self-RAG's IsSup over its
        claims against the strips they cite (§3.1). No retry: that and IsUse are self-crag's
        (``_check_claims``)."""
        with step(trace, VERIFY) as cost:
            claims = self.checker(question=question, answer=answer.answer, strips=answer.strips, reading=answer.reading)
            cost.notes = (f"confidence {answer.confidence:.2f} < accept {self.settings.accept:.2f} + band "
                          f"{self.settings.verify_band:.2f}: {sum(c.support != 'no' for c in claims)} of {len(claims)} "
                          "claim(s) supported")
        return Checked(VERIFY, answer.answer, claims)

    def _check_claims(self, question: str, chosen_answer: Draft, trace: Trace) -> Checked:
        """Self-RAG's IsSup over the chosen answer's claims against the same evidence, the
        capped stricter retry for unsupported ones, and IsUse (§3.1)."""
        answer, strips, reading = chosen_answer.answer, chosen_answer.strips, chosen_answer.reading
        with step(trace, SELF_CHECK):
            claims = self.checker(question=question, answer=answer, strips=strips, reading=reading)
        checked = Checked(SELF_CHECK, answer, claims)
        retries = self.settings.max_retries
        for _ in range(self.settings.max_retries):
            unsupported = [c.text for c in checked.claims if c.support == "no"]
            if not unsupported:
                break
            trace.note(f"{len(unsupported)} unsupported claim(s): stricter retry")
            checked = self._retry(question, strips, unsupported, checked, trace, reading)
            retries -= 1
        # Self-RAG's IsUse: an answer that does not address the question gets the same capped retry
        threshold = self.usefulness.threshold(self.settings.lower)
        if self.usefulness.judges is not None:
            with step(trace, "usefulness") as cost, continuing(reading):
                checked = replace(checked, usefulness=self.usefulness(question=question, answer=checked.answer))
                cost.notes = f"usefulness={checked.usefulness} (threshold {threshold})"
        if 0 <= checked.usefulness < threshold and retries > 0 and not is_abstention(checked.answer):
            trace.note(f"usefulness {checked.usefulness} below {threshold}: stricter retry")
            checked = self._retry(question, strips, [f"{strip_citations(checked.answer)} (does not answer the "
                                                     "question)"], checked, trace, reading)
        return checked

    def _retry(self, question: str, strips: list[Strip], unsupported: list[str], checked: Checked,
               trace: Trace, reading: Reading | None = None) -> Checked:
        """The capped stricter regeneration and its self-check.

        The retry replaces the checked answer only when its claims hold up at least as well
        (``support_rank``); Self-RAG keeps the output its critique ranks best (§3.3), and a
        stricter prompt on a 1.5B model often writes a worse answer than the first."""
        checked = replace(checked, retried=True)
        with step(trace, "generate-strict"), continuing(reading, context="the numbered context strips above"):
            try:
                retried = self.generator(question=question, strips=strips, unsupported=unsupported)
            except UNREADABLE_OUTPUT as exc:
                trace.note(f"generate-strict: unparseable output ({type(exc).__name__}); the first answer stands")
                return checked
        with step(trace, "self-check-retry"):
            retried_claims = self.checker(question=question, answer=retried, strips=strips, reading=reading)
        if support_rank(retried_claims) < support_rank(checked.claims):
            trace.note(f"the stricter retry held up less ({support_rank(retried_claims)} < "
                       f"{support_rank(checked.claims)}): the first answer stands")
            return checked
        return replace(checked, answer=retried, claims=retried_claims, retry_kept=True)


def support_rank(claims: list[Claim]) -> tuple[int, float]:
    """How well an answer's claims held up: ``(kept claims, share of claims kept)``, each kept
    claim being ``partially`` or ``fully`` supported (Self-RAG's IsSup). An abstention, with
    no claims, ranks ``(0, 0.0)``."""
    kept = sum(c.support != "no" for c in claims)
    return kept, round(kept / len(claims), 4) if claims else 0.0
