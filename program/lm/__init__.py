"""The language model: choosing and configuring it (``configure``), the embedded llama.cpp engine
and its GGUF files from PyPI chunk wheels (``model_files``), bounded retries for served models
(``retry``), the adapter that keeps retrieved text as data (``adapter``), and a boolean field's
probability from token log probabilities (``token_scores``).

``from program.lm import configure_lm`` is the public entry point. It loads DSPy on first use, not
when the package is imported: the command line's flag checks read ``model_files`` (the embedded
models' names) before anything heavy loads.
"""

import os as _os

from program.paths import cache_root as _cache_root

# Both must be set before dspy is imported (no cost-map download, and a cache DSPy finds again):
# here, since every module of the package but model_files imports dspy and this runs first.
_os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
_os.environ.setdefault("DSPY_CACHEDIR", str(_cache_root() / "dspy"))

__all__ = ["DEFAULT_MODEL", "build_lm", "configure_lm", "model_name"]


def __getattr__(name: str):
    """``DEFAULT_MODEL``, ``build_lm``, ``configure_lm``, ``model_name`` from ``program.lm.configure``,
    imported on first use. Raises AttributeError for any other name."""
    if name in __all__:
        # lazy on purpose: DSPy loads with the first of these, not with the package
        from program.lm import configure

        return getattr(configure, name)
    raise AttributeError(f"module 'program.lm' has no attribute {name!r}")
