"""Saving and loading the compiled program: DSPy JSON state plus a manifest beside it.

DSPy saves predictors' instructions and demos (``module.save``) but not field types nor
our thresholds, so the manifest carries the thresholds, the LM, the date, the DSPy version
and the metrics, and the sha256 of the state it belongs to (``state_sha256``).

Saving: both files are written in full and synced under temporary names (``crag.json.new``,
``manifest.json.new``), then renamed into place, state first. A save killed before the first
rename leaves the previous compile; one killed between the two renames leaves the new state
beside the old manifest and the new manifest pending, which the next load finds by the state's
sha256 and completes (roll forward). Loading refuses, in one line naming the file
(:class:`CompiledError`): a state or manifest that is not JSON, thresholds that are not numbers
in [0, 1] with lower <= upper, and a state whose sha256 is not the manifest's. A compile made
with another DSPy version loads with a warning (its prompts may behave differently).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import warnings
from pathlib import Path

import dspy

from program.app.refinement import REFINEMENT_FILE, refines_passages
from program.judges.adapted import adapted_state
from program.judges.operating_point import read_operating_point
from program.judgments import PASSAGE
from program.paths import COMPILED_DIR as PATHS_COMPILED_DIR
from program.stages.draft import ConfidenceModel
from program.stages.settings import DEFAULT_ACCEPT


COMPILED_DIR = PATHS_COMPILED_DIR  # program.paths: the clone's compiled/, or an installed wheel's copy
STATE_FILE = "crag.json"
MANIFEST_FILE = "manifest.json"


PENDING_SUFFIX = ".new"


class CompiledError(ValueError):
    """A compiled folder that cannot be loaded; the one-line message names the file and the problem."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def save_compiled(program, manifest: dict, directory: str | Path = COMPILED_DIR) -> Path:
    """Save ``program``'s DSPy state and ``manifest`` (plus ``state_sha256``) into ``directory``;
    return the state path. An error (a full disk: ``OSError``) leaves the previous compile in place."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state_tmp = directory / f".{STATE_FILE}.tmp{os.getpid()}.json"
    state_new = directory / (STATE_FILE + PENDING_SUFFIX)
    manifest_new = directory / (MANIFEST_FILE + PENDING_SUFFIX)
    try:
        try:
            program.save(str(state_tmp))
        except RuntimeError as exc:  # DSPy wraps a failed write (a full disk) in a RuntimeError
            cause = exc.__cause__ or exc.__context__
            if isinstance(cause, OSError):
                raise cause from None
            raise
        json.loads(state_tmp.read_text())  # refuse to install a state file that does not parse
        with open(state_tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(state_tmp, state_new)
        manifest = {**manifest, "state_sha256": _sha256(state_new)}
        _write_synced(manifest_new, json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    except BaseException:
        for leftover in (state_tmp, state_new, manifest_new):
            leftover.unlink(missing_ok=True)
        raise
    os.replace(state_new, directory / STATE_FILE)  # from here on a load rolls the save forward
    os.replace(manifest_new, directory / MANIFEST_FILE)
    return directory / STATE_FILE


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CompiledError(f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CompiledError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not isinstance(data, dict):
        raise CompiledError(f"{path} must hold a JSON object, not {type(data).__name__}")
    return data


def _finish_pending_save(directory: Path, manifest: dict) -> dict:
    """The manifest that belongs to the state: ``manifest`` itself, or the pending one of a save
    that was interrupted between its two renames (installed now when the folder is writable)."""
    state = directory / STATE_FILE
    expected = manifest.get("state_sha256")
    if not expected or not state.exists() or _sha256(state) == expected:
        return manifest
    pending = directory / (MANIFEST_FILE + PENDING_SUFFIX)
    if pending.exists():
        candidate = _read_json(pending)
        if candidate.get("state_sha256") == _sha256(state):
            try:
                os.replace(pending, directory / MANIFEST_FILE)
            except OSError:
                pass  # a read-only folder: use it without installing it
            return candidate
    raise CompiledError(f"{state} does not match {directory / MANIFEST_FILE} (sha256 {_sha256(state)[:12]}, "
                        f"the manifest says {expected[:12]}): restore both files or recompile")


def _check_pair(path: Path, thresholds, where: str, required: bool = False) -> None:
    if not isinstance(thresholds, dict):
        raise CompiledError(f"{path}: '{where}' must be an object, got {type(thresholds).__name__}")
    for name in ("lower", "upper"):
        value = thresholds.get(name)
        if (value is None and required) or (value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1)):
            raise CompiledError(f"{path}: {where}.{name} must be a number in [0, 1], got {value!r}")
    if thresholds.get("lower", 0) > thresholds.get("upper", 1):
        raise CompiledError(f"{path}: {where}.lower {thresholds['lower']} is above {where}.upper {thresholds['upper']}")


def _check_thresholds(path: Path, manifest: dict) -> None:
    _check_pair(path, manifest.get("thresholds", {}), "thresholds")
    by_corpus = manifest.get("lm_thresholds_by_corpus", {})
    if not isinstance(by_corpus, dict):
        raise CompiledError(f"{path}: 'lm_thresholds_by_corpus' must be an object, got {type(by_corpus).__name__}")
    for key, thresholds in by_corpus.items():
        _check_pair(path, thresholds, f"lm_thresholds_by_corpus.{key}", required=True)


def read_manifest(directory: str | Path = COMPILED_DIR) -> dict | None:
    """The saved manifest, or None when nothing was compiled into ``directory``.

    Raises:
        CompiledError: the manifest is not a JSON object, its thresholds are out of range, or
            it does not belong to the saved state (see the module docstring).
    """
    directory = Path(directory)
    path = directory / MANIFEST_FILE
    if not path.exists():
        return None
    manifest = _finish_pending_save(directory, _read_json(path))
    _check_thresholds(path, manifest)
    return manifest


def check_dspy_version(directory: str | Path, manifest: dict) -> None:
    """Warn (one line) when the compile was made with another DSPy major.minor version."""
    saved = str(manifest.get("dspy_version") or "")
    running = getattr(dspy, "__version__", "")
    if saved and saved.split(".")[:2] != running.split(".")[:2]:
        warnings.warn(f"{Path(directory) / MANIFEST_FILE}: compiled with DSPy {saved}, running {running}; "
                      "its prompts load but may behave differently (recompile: python -m optimize.compile --out DIR)",
                      stacklevel=3)


def has_compiled(directory: str | Path = COMPILED_DIR) -> bool:
    return (Path(directory) / STATE_FILE).exists() and (Path(directory) / MANIFEST_FILE).exists()


def read_state(directory: str | Path = COMPILED_DIR) -> dict:
    """The saved state (predictor name -> state) of the compile in ``directory``.

    Raises:
        CompiledError: the state file is unreadable or not a JSON object."""
    return _read_json(Path(directory) / STATE_FILE)


def _field_prefixes(state: dict) -> list[str]:
    return [f.get("prefix") for f in state.get("signature", {}).get("fields", [])]


def load_state(program, source: str | Path | dict, where: str | Path | None = None) -> None:
    """Load a saved state into ``program``: ``source`` is the state file, or its parsed dict
    (predictor name -> state; ``where`` names its file in errors).

    Predictors the state lacks keep their own; so does a predictor whose saved signature has
    other fields than its current one (the state was compiled for an older signature: DSPy
    would pour its instructions and field descriptions into the new fields by position), with
    a warning to recompile.

    Raises:
        CompiledError: the file is not JSON, a predictor's entry is not a state, or the state
            is another program's.
    """
    if isinstance(source, dict):
        path, saved = Path(where or "<state>"), dict(source)
    else:
        path = Path(source)
        saved = _read_json(path)
    current = {name: param.dump_state() for name, param in program.named_parameters()}
    for name, state in saved.items():
        if name in current and not (isinstance(state, dict) and isinstance(state.get("signature", {}), dict)):
            raise CompiledError(f"{path}: the state of {name} is not a predictor's state")
    unknown = [name for name in saved if name not in current and name != "metadata"]
    if unknown and not any(name in current for name in saved):
        raise CompiledError(f"{path} holds no predictor of this program (it has {', '.join(unknown[:3])}): "
                            "the state of another program")
    for name, state in current.items():
        if name in saved and _field_prefixes(saved[name]) != _field_prefixes(state):
            warnings.warn(f"{path}: {name} was compiled for another signature "
                          f"({_field_prefixes(saved[name])}); it keeps its uncompiled instructions. "
                          "Recompile: python -m optimize.compile --out DIR", stacklevel=2)
            del saved[name]
    state = {**current, **{name: saved[name] for name in current if name in saved}}
    try:
        _apply_state(program, state)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CompiledError(f"{path}: cannot load the saved state ({type(exc).__name__}: {exc})") from None


def _apply_state(program, state: dict) -> None:
    """Pour ``state`` (name -> predictor state) into ``program``'s predictors, all or none.

    DSPy's ``Module.load_state`` first tries the state on a deep copy of the whole module, which
    would copy the knowledge base, the embedder and the judges the program is built with; a
    copy of each predictor is enough to fail before any is touched."""
    params = list(program.named_parameters())
    for name, param in params:
        copy.deepcopy(param).load_state(state[name])
    for name, param in params:
        param.load_state(state[name])


LM_THRESHOLDS = {"lower": 0.2, "upper": 0.6}  # GradeRetrieval's score bands (``score_grade``)


def evaluator_thresholds(manifest: dict, judges, knowledge_base) -> dict:
    """The evaluator's ``lower`` / ``upper`` for the scorer that grades ``knowledge_base``'s
    passages, and that scorer's name (``"scorer"``).

    The program grades passages without an LM call (``CRAG._evaluate``: ``ask_lm=False``, CRAG
    §4.2's evaluator as a cheap judge), so wherever there is a trained passage judge its score
    is the one sorted: its thresholds calibrated on this knowledge base's train questions, else
    PopQA's (``JudgeSet.thresholds_for``), even where the compile found the LM the better grader
    of this knowledge base's passages (``judges.json``'s choices: the LM is not asked here, so
    its score bands, 0.2 / 0.6, would sort scores that are not its own). With no trained judge
    the score is the retrieval similarity: the manifest's thresholds, unless they were
    calibrated on the trained judge's scores (then ``LM_THRESHOLDS``, the grader's bands)."""
    if judges is not None and judges.has(PASSAGE):
        own = judges.thresholds_for(knowledge_base)
        return {"lower": own["lower"], "upper": own["upper"], "scorer": "trained passage judge"}
    saved = manifest.get("thresholds", {})
    if saved.get("source") == "trained passage judge" or "upper" not in saved:
        return {**LM_THRESHOLDS, "scorer": "retrieval similarity"}
    return {"lower": saved["lower"], "upper": saved["upper"], "scorer": "retrieval similarity"}


def refinement_for(directory: str | Path, knowledge_base) -> bool:
    """Whether the reader reads ``knowledge_base``'s passages refined: ``<directory>/refinement.json``
    (``program.app.refinement``); False without the file.

    Raises:
        CompiledError: the file cannot be read, is not a JSON object, or its entry's
            ``refine_passages`` is not a boolean (one line naming the file).
    """
    path = Path(directory) / REFINEMENT_FILE
    if not path.exists():
        return False
    data = _read_json(path)
    try:
        return refines_passages(data, knowledge_base, path)
    except ValueError as exc:
        raise CompiledError(str(exc)) from None


CONFIDENCE_FILE = "confidence.json"


def read_confidence_file(path: str | Path) -> tuple[ConfidenceModel, float]:
    """The model and default ``accept`` of one ``confidence.json``.

    Raises:
        CompiledError: not JSON, weights that are not numbers, or an ``accept`` outside [0, 1].
    """
    path = Path(path)
    data = _read_json(path)
    try:
        model = ConfidenceModel.from_dict(data.get("model"))
    except ValueError as exc:
        raise CompiledError(f"{path}: {exc}") from None
    accept = data.get("accept", DEFAULT_ACCEPT)
    if not isinstance(accept, (int, float)) or not 0.0 <= float(accept) <= 1.0:
        raise CompiledError(f"{path}: 'accept' must be a number in [0, 1], got {accept!r}")
    return model, float(accept)


def _adapted_point(directory: str | Path, knowledge_base) -> tuple[dict | None, str]:
    """The operating point kept with ``knowledge_base`` for this compile (``index``,
    ``optimize.operating_point``), or None; and where it is kept.

    Raises:
        CompiledError: it is unreadable (one line naming where)."""
    state = adapted_state(directory, knowledge_base)
    try:
        return read_operating_point(state), getattr(state, "where", "")
    except (ValueError, OSError) as exc:
        raise CompiledError(str(exc)) from None


def operating_point_source(directory: str | Path, knowledge_base) -> str:
    """Where ``knowledge_base``'s operating point comes from, for ``ask`` to say: ``"labels
    FILE (N rows), <state>/operating_point.json"``, ``"written questions, ..."``, or
    ``"the compile's confidence.json"`` (``"the default"`` without one)."""
    try:
        point, where = _adapted_point(directory, knowledge_base)
    except CompiledError:
        point, where = {"source": "unreadable"}, ""
    if point is not None:
        return f"{point.get('source', 'written questions')}, {where}/operating_point.json"
    return f"the compile's {CONFIDENCE_FILE}" if (Path(directory) / CONFIDENCE_FILE).exists() else "the default"


def load_confidence(directory: str | Path, knowledge_base) -> tuple[ConfidenceModel, float]:
    """The answer-confidence model and the operating point for ``knowledge_base``.

    ``<directory>/confidence.json`` (written by ``python -m optimize.train_confidence``) holds the
    model's weights and its default ``accept``; the operating point ``program index`` set for
    this knowledge base (``operating_point.json`` kept with it, ``adapted_state``) wins over it.
    Without the file: the default weights and ``DEFAULT_ACCEPT``.

    Raises:
        CompiledError: a file that is not JSON, or an ``accept`` outside [0, 1].
    """
    path = Path(directory) / CONFIDENCE_FILE
    model, accept = read_confidence_file(path) if path.exists() else (ConfidenceModel(), DEFAULT_ACCEPT)
    point, where = _adapted_point(directory, knowledge_base)
    if point is not None:
        path, accept = f"{where}/operating_point.json", point.get("accept", accept)
    if not isinstance(accept, (int, float)) or not 0.0 <= float(accept) <= 1.0:
        raise CompiledError(f"{path}: 'accept' must be a number in [0, 1], got {accept!r}")
    return model, float(accept)
