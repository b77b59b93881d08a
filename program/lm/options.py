"""The language-model options every command shares, defined once: which model, where it is served,
and whether DSPy's cache may answer (``ask``, ``serve``, ``index``, ``optimize.*``, ``experiments.*``)."""

from __future__ import annotations

import argparse

MODEL_HELP = ("embedded-1.5b (default), embedded-0.5b, or a DSPy model string (openai/NAME for a served model "
              "at --api-base); env CRAG_LM")
API_BASE_HELP = "base URL of a served model (an OpenAI-compatible /v1); env CRAG_API_BASE"
NO_CACHE_HELP = "bypass DSPy's LM cache: every call is made (a cached call reports no tokens and ~0 s)"


def add_lm_options(parser: argparse.ArgumentParser, role: str | None = None, cache: bool = True) -> None:
    """Add ``--model``, ``--api-base`` and (``cache``) ``--no-cache`` to ``parser``; ``role`` says
    what the model does there ("the LM that writes questions"), before the common help."""
    parser.add_argument("--model", help=(f"{role}: " if role else "") + MODEL_HELP)
    parser.add_argument("--api-base", help=API_BASE_HELP)
    if cache:
        parser.add_argument("--no-cache", action="store_true", help=NO_CACHE_HELP)


def lm_from(args: argparse.Namespace):
    """The ``dspy.LM`` the options in ``args`` name, configured as DSPy's default
    (``program.lm.configure.configure_lm``; its errors as it raises them)."""
    # lazy on purpose: parsing the options loads no model code
    from program.lm.configure import configure_lm

    return configure_lm(getattr(args, "model", None), getattr(args, "api_base", None),
                        cache=not getattr(args, "no_cache", False))


__all__ = ["add_lm_options", "lm_from"]
