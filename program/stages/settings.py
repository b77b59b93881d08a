"""CRAG's settings in one object, built once (``load_compiled``, ``build_program``) and never set after.

The CRAG paper (Yan et al. 2024, §4.3) routes on two thresholds of the retrieval evaluator;
Self-RAG (Asai et al. 2023, §3.3) adds the claim check and the retrieve-or-not step; the rest are
this program's caps and operating point. ``CRAG(..., settings=CRAGSettings(...))`` reads them from
here; a keyword given to ``CRAG`` replaces the field of that name (``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass

from program.guards.caps import QuestionCaps

DEFAULT_ACCEPT = 0.5  # the operating point when neither the compile nor ``index`` set one
# crag checks the claims of an answer whose confidence is less than this above ``accept``
# (chosen on dev rows: docs/lab/2026-12-06-claim-check-band.md)
DEFAULT_VERIFY_BAND = 0.1


@dataclass(frozen=True)
class CRAGSettings:
    """What the program does with a question, apart from its parts (knowledge base, web, judges).

    Attributes:
        k: passages retrieved and read (at least 1).
        upper, lower: the evaluator's thresholds on relevance scores in [0, 1], ``lower <= upper``:
            ``upper`` names a passage relevant (a web page at or above it is refined as relevant);
            no passage at or above ``lower`` counts against the draft (``program.stages.decision``).
        accept: the operating point in [0, 1]: an answer whose confidence reaches it is given, one
            below it is declined with the honest fallback (set per knowledge base by ``program
            index``; ``DEFAULT_ACCEPT`` otherwise).
        verify_band: crag (``self_check`` False) checks every claim of an answer whose confidence
            is less than ``accept + verify_band`` (Self-RAG's IsSup, no retry), in [0, 1]:
            unsupported claims are dropped and the program declines when none stands. An answer
            near the operating point is the one its confidence cannot vouch for (AUROC .6–.7 on the
            documentation domains); one well above it is given as drafted, one LM call. 0 turns
            the check off; 1 checks every answer.
        self_check: run Self-RAG's claim-level support check on every answer (with its retry,
            claim dropping and fallback; the ``self-crag`` evaluation mode); False is ``crag``.
        max_retries: stricter regenerations when a claim is unsupported (capped; default 1).
        decide_retrieval: first ask ``DecideRetrieval`` (Self-RAG's Retrieve token, at temperature
            0) whether the question needs sources at all; when it says no, answer closed-book with
            ``AnswerClosedBook`` (``result.retrieval_skipped``, ``action`` None). Output it cannot
            parse means retrieve. Off by default.
        refine_passages: the reader reads the knowledge base's passages refined into knowledge
            strips (decompose-then-recompose, CRAG §4.4); set where the strip judge keeps an
            answering strip for at least 90 % of the labeled questions (``program.app.refinement``).
        continue_reading: the claim check, the stricter retry and the usefulness check continue
            the reader's conversation (``program.lm.continuation``): the prompt cache serves the
            strips the reader read and each check pays for its own turn; False sends each check
            its evidence in a prompt of its own.
        probabilities: the evaluator asks the LM's yes/no probability where it asks the LM (the
            compile's calibration says whether that pays).
        max_chars: characters of each passage the reader reads (as plain RAG reads it).
        web_k: web hits kept (``caps.web_pages`` replaces it when caps are given).
        caps: the per-question caps (``program.guards.caps.QuestionCaps``: seconds, tokens, LM
            calls, and the web pages, strips and claims kept); None reads them from the
            environment at each question, with the parts' defaults.

    Raises:
        ValueError: a field out of its range, naming the field and the value.
    """

    k: int = 3
    upper: float = 0.6
    lower: float = 0.2
    accept: float = DEFAULT_ACCEPT
    verify_band: float = DEFAULT_VERIFY_BAND
    self_check: bool = True
    max_retries: int = 1
    decide_retrieval: bool = False
    refine_passages: bool = False
    continue_reading: bool = True
    probabilities: bool = False
    max_chars: int = 1500
    web_k: int = 2
    caps: QuestionCaps | None = None

    def __post_init__(self) -> None:
        for name in ("accept", "verify_band", "upper", "lower"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {getattr(self, name)}")
        if self.lower > self.upper:
            raise ValueError(f"lower must be at most upper, got lower {self.lower} and upper {self.upper}")
        if self.k < 1:
            raise ValueError(f"k must be at least 1, got {self.k}")
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {self.max_retries}")

    @classmethod
    def given(cls, settings: "CRAGSettings | None", fields: dict) -> "CRAGSettings":
        """``settings``, or the settings of ``fields`` (``CRAG(kb, k=5)``); never a merge of both:
        layers merge in one place, ``program.app.configuration.resolve``.

        Raises:
            TypeError: both given, or a field that names no setting."""
        if settings is not None and fields:
            raise TypeError(f"CRAG: give settings or its fields ({', '.join(fields)}), not both")
        return settings or cls(**fields)
