"""One place decides: everything a program needs for one knowledge base, resolved once.

:func:`resolve` reads the compiled folder (``program.app.compiled``'s readers), the knowledge
base's adapted judges, demo and operating point, the web and the caller's options, and returns a
frozen :class:`ProgramConfig`; :func:`build` makes the ``CRAG`` module from it, and every stage
gets its slice at construction: nothing is assigned to a stage, judge or generator afterwards.
``load_compiled`` is ``build(resolve(...))``. ``config.sources`` says where each decided value
came from, for ``ask`` to print and the trace to keep.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from program.guards.caps import QuestionCaps
from program.adaptation.reader_demo import load_reader_demo, with_reader_demo
from program.app import resources
from program.app.compiled import (COMPILED_DIR, STATE_FILE, CompiledError, check_dspy_version, evaluator_thresholds,
                                  has_compiled, load_confidence, load_state, operating_point_source, read_manifest,
                                  read_state, refinement_for)
from program.judges import JUDGES_FILE, load_judges
from program.judges.adapted import adapted_state, load_adapted
from program.judges.store import JudgeSet
from program.stages.crag import CRAG
from program.stages.draft import ConfidenceModel
from program.stages.settings import CRAGSettings


@dataclass(frozen=True)
class ProgramConfig:
    """What one ``CRAG`` module is built from.

    Attributes:
        knowledge_base: the knowledge base answered from.
        web: the web backend of the correction (CRAG §4.3), None for no web.
        embedder: the sentence embedder of the judges and the strip pre-filter.
        judges: the trained judges for this knowledge base (``JudgeSet.for_knowledge_base``:
            its measured choices, its thresholds, the embedder), None without ``judges.json``.
        confidence: the answer-confidence model; ``settings.accept`` is its operating point.
        settings: every setting of the route (``CRAGSettings``), the compile's then the caller's.
        state: predictor name -> compiled state, the knowledge base's own reader demo folded in;
            None for the uncompiled Signatures.
        state_file: the file ``state`` came from, named in errors.
        sources: setting -> where its value came from (``thresholds``, ``operating point``,
            ``judges``, ``reader demo``, ``web``).
    """

    knowledge_base: object
    web: object
    embedder: object
    judges: JudgeSet | None
    confidence: ConfidenceModel
    settings: CRAGSettings
    state: dict | None = None
    state_file: Path | None = None
    sources: dict[str, str] = field(default_factory=dict)


def _judges_for(directory: Path, knowledge_base, embedder) -> tuple[JudgeSet | None, str]:
    """The judges adapted to ``knowledge_base`` from its own documents, else the compile's; and which."""
    adapted = load_adapted(directory, knowledge_base)
    judges = adapted or load_judges(directory)
    if judges is None:
        warnings.warn(f"{directory} holds no {JUDGES_FILE}: passages are scored by retrieval similarity and every "
                      "other judgment is asked of the LM (train the judges: python -m optimize.compile --out DIR "
                      "--only judges)",
                      stacklevel=3)
        return None, "none: the LM judges"
    where = f"adapted ({adapted_state(directory, knowledge_base).where})" if adapted \
        else f"the compile's {JUDGES_FILE}"
    return judges.for_knowledge_base(knowledge_base, embedder), where


def _state_with_demo(directory: Path, knowledge_base) -> tuple[dict, str]:
    """The compiled state, with the reader demo ``program index`` wrote from ``knowledge_base``'s
    own documents in place of the compiled demos it does not hold (``with_reader_demo``)."""
    state = read_state(directory)
    try:
        demo = load_reader_demo(adapted_state(directory, knowledge_base))
    except ValueError as exc:
        raise CompiledError(str(exc)) from None
    if demo is None:
        return state, "the compile's"
    return with_reader_demo(state, knowledge_base, demo), "this knowledge base's own (program index)"


def resolve(directory: str | Path | None = COMPILED_DIR, knowledge_base=None, web="default", embedder=None,
            **options) -> ProgramConfig:
    """Resolve the compiled program in ``directory`` for ``knowledge_base``, once: the one place
    where defaults, the compile, the knowledge base's adapted files, the environment (the caps) and
    the caller's options (the flags) merge.

    Args:
        directory: folder holding ``crag.json`` and ``manifest.json`` (default ``compiled/``);
            None for the uncompiled Signatures, the default settings and no judges.
        knowledge_base: default the embedded PopQA knowledge base.
        web: a backend, a backend name, a ``program.web.WebConfig``, or None
            (``program.app.resources.resolve_web``); ``"default"``: ``$CRAG_WEB``, else the
            offline snapshot for the PopQA knowledge base and no web for any other.
        embedder: default the packaged all-MiniLM-L6-v2.
        **options: ``confidence`` (a ``ConfidenceModel``), or fields of ``CRAGSettings``
            (``k``, ``max_retries``, ``decide_retrieval``...) overriding the compile's; None leaves
            ``confidence`` and ``accept`` to the compile. A predictor that an option adds and the
            compiled state does not hold (``decide_retrieval``'s, in a state compiled before the
            decider was) keeps its uncompiled instructions.

    Judges adapted to ``knowledge_base`` from its own documents (kept with it,
    ``program.judges.adapted.adapted_state``, by ``python -m program index`` or
    ``python -m optimize.compile --kb``) replace the
    compile's own, with the reader demo written from those documents; without any judges every
    judgment but the passage score is asked of the LM, with a warning. The evaluator's
    thresholds are those of the scorer that grades this knowledge base's passages
    (``evaluator_thresholds``); the operating point is the knowledge base's own (``index``,
    ``optimize.operating_point``), else the compile's.

    Raises:
        FileNotFoundError: nothing compiled in ``directory`` (run ``python -m optimize.compile --out DIR``).
        CompiledError: a corrupt state, manifest, reader demo or refinement.json, or a manifest
            not the state's.
        program.judges.JudgesFileError: ``judges.json`` is unreadable.
    """
    if directory is None:
        return _uncompiled(knowledge_base, web, embedder, options)
    directory = Path(directory)
    if not has_compiled(directory):
        raise FileNotFoundError(f"no compiled program in {directory}; run: python -m optimize.compile --out DIR")
    manifest = read_manifest(directory)
    check_dspy_version(directory, manifest)
    kb = knowledge_base if knowledge_base is not None else resources.knowledge_base()
    embedder = embedder if embedder is not None else resources.embedder()
    judges, judges_source = _judges_for(directory, kb, embedder)
    thresholds = evaluator_thresholds(manifest, judges, kb)
    confidence, accept = load_confidence(directory, kb)
    confidence = options.pop("confidence", None) or confidence
    overrides = {k: v for k, v in options.items() if v is not None or k != "accept"}
    settings = replace(CRAGSettings(upper=thresholds["upper"], lower=thresholds["lower"], accept=accept,
                                    refine_passages=refinement_for(directory, kb), caps=QuestionCaps.from_env()),
                       **overrides)  # the caps from the environment, read once, here
    state, demo_source = _state_with_demo(directory, kb)
    backend = resources.resolve_web(web, kb)
    sources = {"thresholds": thresholds["scorer"], "operating point": operating_point_source(directory, kb),
               "judges": judges_source, "reader demo": demo_source, "web": resources.web_name(backend)}
    return ProgramConfig(kb, backend, embedder, judges, confidence, settings, state, directory / STATE_FILE, sources)


def _uncompiled(knowledge_base, web, embedder, options: dict) -> ProgramConfig:
    """``resolve`` without a compile: the default settings, the environment's caps, then ``options``."""
    kb = knowledge_base if knowledge_base is not None else resources.knowledge_base()
    confidence = options.pop("confidence", None) or ConfidenceModel()
    overrides = {k: v for k, v in options.items() if v is not None or k != "accept"}
    settings = replace(CRAGSettings(caps=QuestionCaps.from_env()), **overrides)
    backend = resources.resolve_web(web, kb)
    sources = {"thresholds": "the defaults (uncompiled)", "judges": "none: the LM judges",
               "web": resources.web_name(backend)}
    return ProgramConfig(kb, backend, embedder if embedder is not None else resources.embedder(), None, confidence,
                         settings, sources=sources)


def build(config: ProgramConfig) -> CRAG:
    """The ``CRAG`` module of ``config``: its stages built with their slices, the compiled state loaded.

    Raises:
        CompiledError: the state does not fit the program (``load_state``)."""
    program = CRAG(config.knowledge_base, web=config.web, embedder=config.embedder, judges=config.judges,
                   confidence=config.confidence, settings=config.settings, sources=config.sources)
    if config.state is not None:
        load_state(program, config.state, config.state_file)
    return program


def load_compiled(directory: str | Path = COMPILED_DIR, knowledge_base=None, web="default", embedder=None,
                  **options) -> CRAG:
    """Build the CRAG program from the compile in ``directory`` for ``knowledge_base``:
    ``build(resolve(...))`` (see :func:`resolve` for the arguments and errors)."""
    return build(resolve(directory, knowledge_base, web, embedder, **options))


__all__ = ["ProgramConfig", "build", "load_compiled", "resolve"]
