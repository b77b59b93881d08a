"""Typed objects handed from one CRAG stage to the next.

Every stage of the flow in docs/how-it-works.md (retrieve → evaluate → refine → generate →
self-check) takes and returns these dataclasses, so that the trace and the
result can be serialised with :func:`dataclasses.asdict`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum

from pydantic import computed_field

from program.text import without_footnotes


class Action(str, Enum):
    """The retrieval evaluator's three actions (CRAG, Yan et al. 2024, §4.3)."""

    CORRECT = "correct"
    INCORRECT = "incorrect"
    AMBIGUOUS = "ambiguous"


class Ending(str, Enum):
    """How a question ended (``Outcome.ending``), apart from the route taken (``Action``)."""

    DRAFT = "draft"  # answered by the reader's first answer
    CORRECTED = "corrected"  # answered by the answer written again after CRAG's correction
    DECLINED = "declined"  # nothing reliable remained: the honest fallback (``Outcome.reason`` says why)
    STOPPED = "stopped"  # a cap was reached (``program.guards.caps``): the honest fallback
    CLOSED_BOOK = "closed-book"  # answered without retrieval (Self-RAG's Retrieve = no, or the closed mode)
    ANSWERED = "answered"  # a baseline's answer (rag, langgraph): no verdict was made
    NO_DOCUMENTS = "no-documents"  # the question's filter (or its key's scope) keeps no document: nothing was read


@dataclass(frozen=True)
class Outcome:
    """How one question ended, in one value (``CRAGResult.outcome``).

    Attributes:
        ending: the ``Ending``.
        reason: one phrase saying why this answer or why the decline ("confidence 0.31 < accept
            0.50", "the knowledge base never mentions 'velero'", "stopped: seconds cap 300 reached", ...);
            "" for a baseline.
        declined: the best answer written and held back (``DECLINED``); "" otherwise, and when
            nothing was written.
        strict: the answer shown is the claim check's stricter retry of the draft or the
            corrected answer (Self-RAG §3.3).
    """

    ending: Ending = Ending.ANSWERED
    reason: str = ""
    declined: str = ""
    strict: bool = False

    @property
    def fallback(self) -> bool:
        """True when the honest fallback was given: declined, or stopped by a cap."""
        return self.ending in (Ending.DECLINED, Ending.STOPPED)

    def summary(self) -> str:
        """One line: ``declined: <reason>``, ``stopped: ...`` or ``answered by the draft: <reason>``."""
        if self.ending in (Ending.STOPPED, Ending.NO_DOCUMENTS):
            return self.reason
        if self.fallback:
            return f"declined: {self.reason}"
        who = {Ending.DRAFT: "the draft", Ending.CORRECTED: "the corrected answer"}.get(self.ending, self.ending.value)
        return f"answered by {'the stricter retry of ' if self.strict else ''}{who}" + (
            f": {self.reason}" if self.reason else "")


@dataclass
class Passage:
    """One retrievable unit: a knowledge-base chunk or a web page.

    Attributes:
        id: stable id, e.g. ``"kb-0001#0"`` (document id, ``#``, chunk number) or a URL.
        text: the passage text.
        source: where it came from: ``"kb"`` or ``"web"``.
        title: document or page title, may be empty.
        url: page URL for web passages, source path for files, may be empty.
        score: retrieval similarity (cosine, in [-1, 1]); 0.0 when not retrieved.
        page: the 1-based PDF page the passage starts on; 0 when its document has no pages.
    """

    id: str
    text: str
    source: str = "kb"
    title: str = ""
    url: str = ""
    score: float = 0.0
    page: int = 0


@dataclass
class ChunkGrade:
    """The retrieval evaluator's verdict on one retrieved passage (CRAG §4.2).

    Attributes:
        passage_id: the graded passage's id.
        score: relevance in [0, 1]; -1.0 when lazy evaluation left the passage ungraded.
        reason: one of ``irrelevant | partial | stale | contradicts-other-source | relevant | ungraded``.
        explanation: the model's short justification.
    """

    passage_id: str
    score: float
    reason: str
    explanation: str = ""


@dataclass
class Strip:
    """A knowledge strip: a sentence-level piece of a passage (CRAG §4.4).

    Attributes:
        source_id: id of the passage the strip came from.
        position: index of the strip inside its passage (keeps source order).
        text: the strip text.
        relevance: StripRelevance score in [0, 1]; -1.0 until graded.
        url: URL of the source passage for web strips.
        title: title of the source document or page, may be empty.
        page: the PDF page of the source passage; 0 when it has no pages.

    The source's own footnote markers ("[54]", "[citation needed]") are removed from ``text``
    here, where every strip is made, so that the only ``[n]`` an answer holds are the
    program's strip numbers (``program.text.without_footnotes``).
    """

    source_id: str
    position: int
    text: str
    relevance: float = -1.0
    url: str = ""
    title: str = ""
    page: int = 0

    def __post_init__(self) -> None:
        self.text = without_footnotes(self.text)


@dataclass
class Claim:
    """One atomic claim of the answer and its Self-RAG IsSup verdict.

    Attributes:
        text: the claim.
        support: ``fully | partially | no``.
        cited: 1-based numbers of the strips the answer cited for it.
        kept: False when the claim was dropped from the final answer.
        score: the trained support judge's score in [0, 1]; -1.0 when it did not score the
            claim (word overlap already decided, or the LM judged alone).
    """

    text: str
    support: str = "no"
    cited: list[int] = field(default_factory=list)
    kept: bool = True
    score: float = -1.0


@dataclass
class Citation:
    """A numbered citation in the answer: ``[n]`` points at strip ``n`` of ``CRAGResult.strips``.

    Attributes:
        number: the ``n`` of ``[n]``, 1-based.
        source_id: id of the strip's passage (a chunk id or a URL).
        url: the passage's URL or source path, may be empty.
        text: the strip's text.
        title: the source's title, may be empty.
        sentences: 0-based indices into ``CRAGResult.sentences`` of the sentences citing it.
        page: the PDF page the strip's passage starts on; 0 when it has no pages.
        label: how the citation names its source: ``"report.pdf p. 14"`` (the document and its
            page), else the source id (a chunk id or a URL); filled in when not given.
    """

    number: int
    source_id: str
    url: str
    text: str
    title: str = ""
    sentences: list[int] = field(default_factory=list)
    page: int = 0
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            self.label = f"{self.source_id.rsplit('#', 1)[0]} p. {self.page}" if self.page else self.source_id


@dataclass
class AnswerSentence:
    """One sentence of the answer and the strips it cites (ALCE's statement, Gao et al. 2023 §2).

    Attributes:
        text: the sentence, without its markers.
        cited: 1-based strip numbers it cites, in the answer's order.
        supported: False when no strip supports it (it then cites nothing).
        by: who chose the markers: ``model`` (the generator's, each checked), ``attribution``
            (set by the support judge: a marker missing or wrong) or ``none`` (unsupported).
    """

    text: str
    cited: list[int] = field(default_factory=list)
    supported: bool = True
    by: str = "model"


@dataclass
class StepCost:
    """Cost of one named step: LM calls, tokens and wall-clock seconds.

    ``prompt_tokens`` counts every prompt token the step's calls sent; ``cached_tokens`` those of
    them the LM's prompt cache served (read before, not read again; 0 when the LM does not say).
    """

    step: str
    lm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    notes: str = ""
    cached_tokens: int = 0


@dataclass
class Trace:
    """What happened, step by step, for one question.

    Attributes:
        steps: cost of each named step, in order.
        events: notable decisions and failures, in order.
        rewritten_query: the last web search query (``RewriteQuery``'s output).
        web: one record per web search (``program.stages.web_path.WebResult.to_trace``): the question,
            the rewritten query, the backend, the hits, how many the domain scope dropped, the
            pages fetched and the fetch failures, and the error when the web gave nothing.
        caps_hit: one ``{"cap", "limit", "detail"}`` per cap that stopped or trimmed the work
            (``program.guards.caps``: seconds, tokens, lm_calls, lm_retries, web_pages, strips, claims).
        judges: who decided each judgment (``program.judges.JudgeSet.report``): ``judgments``
            (passage, strip, support, usefulness -> ``trained`` / ``lm`` / ``cascade``),
            ``adapted`` (the judges were adapted to this knowledge base from its documents) and
            ``corpus``; empty for modes with no judgment (``rag``).
    """

    steps: list[StepCost] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    rewritten_query: str = ""
    web: list[dict] = field(default_factory=list)
    caps_hit: list[dict] = field(default_factory=list)
    judges: dict = field(default_factory=dict)

    # computed fields: pydantic (the service's response model) serialises them, as ``to_dict`` does
    @computed_field
    @property
    def lm_calls(self) -> int:
        return sum(s.lm_calls for s in self.steps)

    @computed_field
    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps)

    @computed_field
    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps)

    @computed_field
    @property
    def cached_tokens(self) -> int:
        return sum(s.cached_tokens for s in self.steps)

    @computed_field
    @property
    def seconds(self) -> float:
        return round(sum(s.seconds for s in self.steps), 3)

    def note(self, event: str) -> None:
        self.events.append(event)


FALLBACK_ANSWER = "I don't have reliable information on this."


@dataclass
class Correction:
    """What CRAG's knowledge correction found (§4.3): the context it adds and its grades.

    Attributes:
        strips: new knowledge-base passages (whole, one strip each) and the web pages' kept strips.
        grades: the evaluator's grades of every passage found (knowledge base and web).
    """

    strips: list[Strip] = field(default_factory=list)
    grades: list[ChunkGrade] = field(default_factory=list)


@dataclass(frozen=True)
class CRAGResult:
    """The answer to one question, with everything needed to audit it; frozen, built once (crag
    and self-crag: from the verdict, ``program.stages.verdict``; ``dataclasses.replace`` for a changed copy).

    Attributes:
        question: the question answered: as asked, or for a follow-up in a conversation the
            standalone question it was rewritten into (``program.stages.followup``).
        asked: the follow-up as the user wrote it, when it was rewritten into ``question``; else "".
        answer: final answer text (``FALLBACK_ANSWER`` when the fallback fired).
        action: the route taken, not how it ended (``outcome``) (``langgraph``: CORRECT when
            every passage was graded relevant, INCORRECT when one was not and it took the web route), or None when
            no evaluator ran: the ``closed`` and ``rag`` modes, and a question the retrieval
            decider answered without retrieval (``retrieval_skipped``; Self-RAG's Retrieve = no
            is not one of CRAG's actions).
        confidence: the answer's probability of being right, in [0, 1]
            (``program.stages.draft.ConfidenceModel`` over the answer's checks); for the fallback,
            that of the best answer declined (``outcome.declined``: the decline is right with probability
            1 - confidence). ``rag`` reports its one answer's the same way.
        outcome: how the question ended (``Outcome``: answered by the draft, after correction,
            declined with its reason, closed-book, stopped by a cap; a baseline's ``answered``).
        draft: the reader's first answer (``crag`` and ``self-crag``), before any correction.
        draft_checks: the draft's checks (``program.stages.draft.DraftEvidence`` as a dict:
            support, premise, question_coverage, token_probability, passage_score, cited, abstained).
        citations: the strips the answer cites, numbered as in the answer.
        sentences: the answer's sentences with their citations and support
            (``program.stages.attribution``); empty for the fallback and for an abstention.
        grades: per-chunk grades with reasons.
        strips: the knowledge strips kept after decompose-then-recompose.
        claims: the answer's claims with support verdicts.
        retried: True when the stricter regeneration ran.
        corrected_grades: the grades of the passages the correction found (the rewritten
            query's new knowledge-base passages and the web pages), when they were judged.
        usefulness: Self-RAG's IsUse for the final answer of the self-check, in [0, 1]
            (``program.stages.usefulness``); -1.0 when not judged (no judges, or no self-check).
        retrieval_skipped: True when the retrieval decider (``CRAG(decide_retrieval=True)``,
            ``DecideRetrieval``) judged that the question needs no sources, and the answer was
            written closed-book (``AnswerClosedBook``): no grades, strips, claims or citations.
        trace: steps with LM calls, tokens and seconds, and notable events.
        mode: ``closed``, ``rag``, ``crag`` (no claim check), ``self-crag`` (the whole program) or
            ``langgraph`` (LangGraph's CRAG tutorial, ``program.stages.baselines.LangGraphCRAG``).
        filter: the documents the question could read (``program.retrieval.filters.DocumentFilter.to_dict``:
            the request's filter intersected with its key's scope); ``{}`` for the whole knowledge base.
    """

    question: str
    answer: str
    action: Action | None = None
    confidence: float = 0.0
    asked: str = ""
    draft: str = ""
    draft_checks: dict = field(default_factory=dict)
    outcome: Outcome = field(default_factory=Outcome)
    citations: list[Citation] = field(default_factory=list)
    sentences: list[AnswerSentence] = field(default_factory=list)
    grades: list[ChunkGrade] = field(default_factory=list)
    strips: list[Strip] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    retried: bool = False
    retrieval_skipped: bool = False
    corrected_grades: list[ChunkGrade] = field(default_factory=list)
    usefulness: float = -1.0
    trace: Trace = field(default_factory=Trace)
    mode: str = "self-crag"
    filter: dict = field(default_factory=dict)

    @property
    def fallback(self) -> bool:
        """True when nothing reliable remained and the honest fallback was given (``Outcome.fallback``)."""
        return self.outcome.fallback

    def to_dict(self) -> dict:
        """The result as plain data (the JSON of ``ask --json`` and of the service's ``POST /ask``):
        every field, the action's value, and the trace's totals (LM calls, tokens, seconds)."""
        d = asdict(self)
        d["action"] = self.action.value if self.action else None
        d["outcome"]["ending"] = self.outcome.ending.value
        d["trace"]["lm_calls"] = self.trace.lm_calls
        d["trace"]["prompt_tokens"] = self.trace.prompt_tokens
        d["trace"]["completion_tokens"] = self.trace.completion_tokens
        d["trace"]["cached_tokens"] = self.trace.cached_tokens
        d["trace"]["seconds"] = round(self.trace.seconds, 3)
        return d
