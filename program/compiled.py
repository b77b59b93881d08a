"""Saving and loading the compiled program: DSPy JSON state plus a manifest beside it.

DSPy saves predictors' instructions and demos (``module.save``) but not field types nor
our thresholds, so the manifest carries the thresholds, the LM, the date, the DSPy version
and the metrics. Both files are written to a temporary name and renamed into place, so an
interrupted save never leaves a half-written compiled program.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

from program.judges import JUDGES_FILE, load_judges
from program.resources import PROJECT_ROOT

COMPILED_DIR = PROJECT_ROOT / "compiled"
STATE_FILE = "crag.json"
MANIFEST_FILE = "manifest.json"


def _atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def save_compiled(program, manifest: dict, directory: str | Path = COMPILED_DIR) -> Path:
    """Save ``program``'s DSPy state and ``manifest`` into ``directory``; return the state path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state_tmp = directory / f".{STATE_FILE}.tmp{os.getpid()}.json"
    program.save(str(state_tmp))
    json.loads(state_tmp.read_text())  # refuse to install a state file that does not parse
    os.replace(state_tmp, directory / STATE_FILE)
    _atomic_write_text(directory / MANIFEST_FILE, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return directory / STATE_FILE


def read_manifest(directory: str | Path = COMPILED_DIR) -> dict | None:
    """The saved manifest, or None when nothing was compiled into ``directory``."""
    path = Path(directory) / MANIFEST_FILE
    return json.loads(path.read_text()) if path.exists() else None


def has_compiled(directory: str | Path = COMPILED_DIR) -> bool:
    return (Path(directory) / STATE_FILE).exists() and (Path(directory) / MANIFEST_FILE).exists()


def _field_prefixes(state: dict) -> list[str]:
    return [f.get("prefix") for f in state.get("signature", {}).get("fields", [])]


def load_state(program, path: str | Path) -> None:
    """Load the saved state into ``program``.

    Predictors the state lacks keep their own; so does a predictor whose saved signature has
    other fields than its current one (the state was compiled for an older signature: DSPy
    would pour its instructions and field descriptions into the new fields by position), with
    a warning to recompile.
    """
    path = Path(path)
    saved = json.loads(path.read_text())
    current = {name: param.dump_state() for name, param in program.named_parameters()}
    for name, state in current.items():
        if name in saved and _field_prefixes(saved[name]) != _field_prefixes(state):
            warnings.warn(f"{path}: {name} was compiled for another signature "
                          f"({_field_prefixes(saved[name])}); it keeps its uncompiled instructions. "
                          "Recompile: python -m optimize.compile", stacklevel=2)
            del saved[name]
    own = {name: state for name, state in current.items() if name not in saved}
    if not own:
        program.load(str(path))  # DSPy's own loader also warns about dependency version changes
        return
    program.load_state({**own, **saved})


LM_THRESHOLDS = {"lower": 0.2, "upper": 0.6}  # GradeRetrieval's score bands (``score_grade``)


def evaluator_thresholds(manifest: dict, judges, knowledge_base) -> dict:
    """The evaluator's ``lower`` / ``upper`` for the passage judge in use on ``knowledge_base``:
    those calibrated on the trained judge's scores for this knowledge base (or PopQA's) when it
    or the cascade decides; when the LM decides, the manifest's LM-calibrated ones, or
    ``LM_THRESHOLDS`` when the compile calibrated the trained judge's instead."""
    saved = manifest.get("thresholds", {})
    if judges is not None and judges.choice("passage").use != "lm":
        return judges.thresholds_for(knowledge_base)
    if saved.get("source") == "trained passage judge":
        return LM_THRESHOLDS
    return saved


def load_compiled(directory: str | Path = COMPILED_DIR, knowledge_base=None, web="snapshot", embedder=None, **kwargs):
    """Build the CRAG program and load its compiled prompts and thresholds.

    Args:
        directory: folder holding ``crag.json`` and ``manifest.json`` (default ``compiled/``).
        knowledge_base: a ``KnowledgeBase``; default the embedded PopQA knowledge base.
        web: a search backend, a backend name (``snapshot``, ``searxng``, ``none``...), a
            ``program.web.WebConfig``, or None (see ``program.resources.resolve_web``).
        embedder: strip pre-filter embedder; default the packaged all-MiniLM-L6-v2.
        **kwargs: other ``CRAG`` arguments (``k``, ``max_retries``, ``decide_retrieval``...),
            overriding the manifest. A predictor that an option adds and the compiled state does
            not hold (``decide_retrieval``'s, in a state compiled before the decider was)
            keeps its uncompiled instructions.

    Returns:
        A ready ``program.crag.CRAG``.

    The trained judges (``judges.json``, ``program.judges``) are attached when the compile saved
    them, with the thresholds calibrated on their scores; without them every judgment is asked
    of the LM, with a warning.

    Raises:
        FileNotFoundError: nothing compiled in ``directory`` (run ``python -m optimize.compile``).
        program.judges.JudgesFileError: ``judges.json`` is unreadable.
    """
    from program.crag import CRAG
    from program import resources

    directory = Path(directory)
    if not has_compiled(directory):
        raise FileNotFoundError(f"no compiled program in {directory}; run: python -m optimize.compile")
    manifest = read_manifest(directory)
    judges = load_judges(directory)
    # Load the prompts before attaching the knowledge base, web, embedder and judges: DSPy's
    # load deep-copies the module first, which those (a faiss index, a torch model) need not suffer.
    program = CRAG(None, **kwargs)
    load_state(program, directory / STATE_FILE)
    program.knowledge_base = knowledge_base if knowledge_base is not None else resources.knowledge_base()
    program.web_searcher.backend = resources.resolve_web(web)
    program.refiner.embedder = embedder if embedder is not None else resources.embedder()
    if judges is not None:
        judges.embedder = program.refiner.embedder
        judges.use_corpus(program.knowledge_base)
        program.judges = judges
    else:
        warnings.warn(f"{directory} holds no {JUDGES_FILE}: every judgment is asked of the LM "
                      "(train the judges: python -m optimize.compile --only judges)", stacklevel=2)
    thresholds = evaluator_thresholds(manifest, judges, program.knowledge_base)
    program.upper = kwargs.get("upper", thresholds.get("upper", 0.6))
    program.lower = kwargs.get("lower", thresholds.get("lower", 0.2))
    return program
