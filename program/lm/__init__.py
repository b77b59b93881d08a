"""The language model: choosing and configuring it (``configure``), the embedded llama.cpp engine
and its GGUF files from PyPI chunk wheels (``model_files``), bounded retries for served models
(``retry``), the adapter that keeps retrieved text as data (``adapter``), and a boolean field's
probability from token log probabilities (``token_scores``).

``from program.lm import configure_lm`` is the public entry point.
"""

from program.lm.configure import DEFAULT_MODEL, build_lm, configure_lm, model_name

__all__ = ["DEFAULT_MODEL", "build_lm", "configure_lm", "model_name"]
