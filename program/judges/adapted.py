"""What is learned about one knowledge base, and where it is kept: its adapted judges, operating
point, reader demo and the rows the judges were fit on.

ARES (Saad-Falcon et al. 2024, §3) fits its judges per domain from questions written for the
domain's own passages. ``python -m program index`` (or ``python -m optimize.compile --kb``) does
that here (``program.adaptation.adapt``) and keeps the result with the knowledge base, per
compile (:func:`adapted_state`):

* a faiss knowledge base: a folder of the per-user state folder (``$CRAG_STATE_DIR``, ``--state``,
  else the cache), keyed by where its index lives, never the install prefix;
* a PostgreSQL knowledge base: its database (``T_state``), so every app server over it uses the same;
* anything else with a manifest: a folder of the state folder keyed by its documents' hashes.

The judges record the documents they were fit on (``adapted["corpus"]``, the ``corpus_key``);
``load_compiled`` picks them only for that version of the knowledge base. Each item is written
whole and atomically, so a kill mid-write leaves the previous one.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from program.judges.store import JUDGES_FILE, JudgeSet, JudgesFileError, corpus_key
from program.paths import state_root
from program.state import FolderState, KnowledgeBaseState


def compile_namespace(compiled_dir: str | Path) -> str:
    """The compile's name in a knowledge base's state: ``<folder name>-<hash of its path>``."""
    resolved = Path(compiled_dir).resolve()
    return f"{resolved.name}-{hashlib.sha256(str(resolved).encode()).hexdigest()[:8]}"


def adapted_state(compiled_dir: str | Path, knowledge_base) -> KnowledgeBaseState | None:
    """Where what is learned about ``knowledge_base`` for the compile ``compiled_dir`` is kept
    (see the module docstring); None for a knowledge base with neither a state nor a manifest."""
    namespace = compile_namespace(compiled_dir)
    if hasattr(knowledge_base, "state"):
        return knowledge_base.state(namespace)
    try:
        return FolderState(state_root() / "adapted" / corpus_key(knowledge_base) / namespace)
    except (AttributeError, KeyError, TypeError):
        return None


def adapted_dir(compiled_dir: str | Path, knowledge_base) -> Path | None:
    """The folder of :func:`adapted_state`, for a knowledge base kept in one (None otherwise)."""
    state = adapted_state(compiled_dir, knowledge_base)
    return getattr(state, "folder", None)


def read_judges(state: KnowledgeBaseState) -> JudgeSet | None:
    """The judges saved in ``state``, or None.

    Raises:
        JudgesFileError: the saved judges are unreadable (the message names where)."""
    data = state.read(JUDGES_FILE)
    if data is None:
        return None
    try:
        return JudgeSet.from_dict(json.loads(data.decode("utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        raise JudgesFileError(f"{state.where}/{JUDGES_FILE}: not a judges file ({type(exc).__name__}: {exc}); "
                              "adapt again: python -m program index PATH") from None


def write_judges(judges: JudgeSet, state: KnowledgeBaseState) -> str:
    """Write ``judges`` into ``state`` (all or nothing); where, for messages. Raises ``OSError``."""
    state.write(JUDGES_FILE, json.dumps(judges.to_dict(), sort_keys=True) + "\n")
    return f"{state.where}/{JUDGES_FILE}"


def load_adapted(compiled_dir: str | Path, knowledge_base) -> JudgeSet | None:
    """The judges adapted to this version of ``knowledge_base`` for ``compiled_dir``, or None
    when it has none (or they were fit on other documents).

    Raises:
        program.judges.JudgesFileError: the saved judges are unreadable (the message names them).
    """
    state = adapted_state(compiled_dir, knowledge_base)
    judges = read_judges(state) if state is not None else None
    if judges is None or not judges.adapted or judges.adapted.get("corpus") != corpus_key(knowledge_base):
        return None
    return judges


__all__ = ["adapted_dir", "adapted_state", "compile_namespace", "load_adapted", "read_judges", "write_judges"]
