"""Where to abstain on one knowledge base, set from rows it gives itself, no hand labels.

CRAG declines an answer whose confidence (``program.stages.draft``) is below its operating point
``accept``. A knowledge base's own questions set that point (ARES's idea of judging a corpus by
questions written for it, Saad-Falcon et al. 2024 §3.1; the threshold the way selective QA picks
one for a target coverage, Kamath et al. 2020):

- *answerable*: questions the LM wrote for sampled chunks (``program.adaptation.lm_questions``; kept when
  retrieval ranks their chunk first); ``accept`` is the confidence below which ``decline`` of
  their drafts fall (default 0.1: about one answerable question in ten declined);
- *look-alikes*: the same questions with a number changed or a name swapped for one the
  documents do not hold; the share of them declined at ``accept`` is reported beside it.

Saved as ``operating_point.json`` in the knowledge base's state
(``program.judges.adapted.adapted_state``), which ``load_compiled`` reads for that knowledge base
(``program.app.compiled.load_confidence``).
"""

from __future__ import annotations

import json
import re
import sys
import time
from dataclasses import asdict, dataclass
import numpy as np
from tqdm import tqdm

from program.state import as_state
from program.types import Trace

OPERATING_POINT_FILE = "operating_point.json"
DEFAULT_DECLINE = 0.1
# Fewer own drafts than this cannot place a tenth's quantile: the compile's point stays.
MIN_ANSWERABLE = 5
# Names no document is likely to hold, for a look-alike's swapped name.
_STRANGERS = ("Quillmere", "Varnholt", "Ostrava-9", "Pellucid", "Dunmore")
_NUMBER = re.compile(r"(?<![\w.])(\d+)(?![\w.])")
_NAME = re.compile(r"(?<=\s)([A-Z][\w-]*[a-z][\w-]*)")


def look_alike(question: str, seed: int = 0) -> str | None:
    """``question`` with its first whole number changed (n -> 3n + 7), else its first name (a
    capitalised word after the first) swapped for a stranger; None when it has neither.

    ``"Can I carry over 40 hours of leave?"`` -> ``"Can I carry over 127 hours of leave?"``.
    """
    if _NUMBER.search(question):
        return _NUMBER.sub(lambda m: str(3 * int(m.group(1)) + 7), question, count=1)
    match = _NAME.search(question)
    if match is None:
        return None
    return question[:match.start()] + _STRANGERS[seed % len(_STRANGERS)] + question[match.end():]


@dataclass
class OperatingPoint:
    """A knowledge base's operating point and the rows that set it.

    Attributes:
        accept: the confidence below which an answer is declined, in [0, 1].
        decline: the share of answerable drafts meant to fall below it.
        answerable: drafts of the knowledge base's own questions.
        look_alikes: drafts of their look-alikes.
        look_alikes_declined: the share of look-alikes below ``accept`` (or declined as abstentions).
        source: where the point came from (``written questions``, or ``labels FILE (N rows)`` when a
            team's own labeled questions set it: ``python -m optimize.operating_point``).
    """

    accept: float
    decline: float
    answerable: int
    look_alikes: int
    look_alikes_declined: float
    source: str = "written questions"

    def line(self) -> str:
        return (f"operating point: accept {self.accept:.2f} declines {self.decline:.0%} of {self.answerable} of its "
                f"own questions and {self.look_alikes_declined:.0%} of {self.look_alikes} look-alikes")


def draft_confidence(crag, question: str) -> float:
    """The confidence of CRAG's draft for ``question`` (retrieve, score, one generation), as
    ``CRAG.forward`` computes it before deciding; 0.0 for an abstaining draft."""
    return draft_with_confidence(crag, question)[2]


def draft_with_confidence(crag, question: str) -> tuple[str, bool, float]:
    """``(answer, abstained, confidence)`` of CRAG's draft for ``question``, as :func:`draft_confidence`."""
    trace = Trace()
    strips, grades = crag.draft_context(question, trace)
    draft = crag.reader(question=question, strips=strips, grades=grades, trace=trace)
    return draft.answer, bool(draft.evidence.abstained), draft.confidence


def set_operating_point(crag, questions: list[str], decline: float = DEFAULT_DECLINE,
                        time_cap: float | None = None, progress: bool = False) -> OperatingPoint:
    """The operating point from drafts of ``questions`` and of their look-alikes (one LM call each).

    Each question is drafted beside its look-alike, so that a ``time_cap`` (seconds; None: no
    cap) that stops the drafting keeps the two kinds in step; what was drafted by then sets the
    point. ``progress``: a bar of drafts on stderr.

    Raises:
        ValueError: ``decline`` outside [0, 1), no question, or fewer than ``MIN_ANSWERABLE``
            questions drafted within ``time_cap``.
    """
    if not 0.0 <= decline < 1.0:
        raise ValueError(f"decline must be in [0, 1), got {decline}")
    if not questions:
        raise ValueError("no question to set the operating point from")
    pairs = [(q, look_alike(q, i)) for i, q in enumerate(questions)]
    own, others = [], []
    started = time.perf_counter()
    with tqdm(total=sum(1 + (t is not None) for _, t in pairs), desc="setting the operating point", unit="draft",
              file=sys.stderr, disable=not progress) as bar:
        for question, twin in pairs:
            if time_cap is not None and time.perf_counter() - started > time_cap:
                break
            own.append(draft_confidence(crag, question))
            bar.update(1)
            if twin is not None:
                others.append(draft_confidence(crag, twin))
                bar.update(1)
    if len(own) < min(MIN_ANSWERABLE, len(questions)):
        raise ValueError(f"only {len(own)} of {len(questions)} questions drafted within {time_cap:.0f} s")
    accept = round(float(np.quantile(own, decline)), 4)
    declined = sum(c < accept or c == 0.0 for c in others) / len(others) if others else 0.0
    return OperatingPoint(accept, decline, len(own), len(others), round(declined, 4))


def save_operating_point(point: OperatingPoint, where) -> str:
    """Write ``point`` as ``operating_point.json`` into ``where`` (a knowledge base's state, or a
    folder), all or nothing; where it went. Raises ``OSError``."""
    state = as_state(where)
    state.write(OPERATING_POINT_FILE, json.dumps(asdict(point), indent=2) + "\n")
    return f"{state.where}/{OPERATING_POINT_FILE}"


def read_operating_point(where) -> dict | None:
    """The operating point saved in ``where`` (a knowledge base's state, a folder, or None), as a
    dict (``accept``, ``source``, ...), or None when there is none.

    Raises:
        ValueError: it is not a JSON object (the message names where it is)."""
    state = as_state(where)
    data = state.read(OPERATING_POINT_FILE) if state is not None else None
    if data is None:
        return None
    try:
        point = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{state.where}/{OPERATING_POINT_FILE} is not valid JSON: {exc}") from None
    if not isinstance(point, dict):
        raise ValueError(f"{state.where}/{OPERATING_POINT_FILE} must hold a JSON object")
    return point
