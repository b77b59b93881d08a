"""Choosing and configuring the language model.

The embedded default runs the Qwen2.5-Coder GGUF in-process with xllamacpp (llama.cpp's
server engine, with prompt-prefix caching), wrapped as a DSPy custom engine
(``dspy.LM(..., engine=...)``, DSPy 3.4's engine contract: ``complete(Request) -> Response``).
Any other DSPy model string (``openai/...``, ``ollama_chat/...``, ``hosted_vllm/...``) goes
through DSPy's own clients; its base URL comes from ``--api-base`` or ``CRAG_API_BASE``, its key from
``CRAG_API_KEY`` or the provider's variable (an ``openai/`` model at a base URL with neither sends a
placeholder: a local vLLM, llama.cpp or LM Studio server takes none). Either
is a ``program.lm.retry.RetryingLM``: a served model's calls have a timeout (``CRAG_LM_TIMEOUT``,
60 s) and at most ``CRAG_LM_RETRIES`` (2) bounded retries, then an ``LMServiceError`` naming the
endpoint; every call first checks the question's time cap (``program.guards.caps``).

Choice, in order: the ``model`` argument, the ``CRAG_LM`` environment variable,
``embedded-1.5b``. Every call is greedy (temperature 0, ``TEMPERATURE``) unless it asks for
another: without it the embedded engine sampled answers at llama.cpp's default temperature 0.8,
and two runs of the same program on the same passages wrote the same draft for 2 questions in 30.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from program.lm.model_files import EMBEDDED_MODELS, cache_root, ensure_model_file, model_problem
from program.lm.words import FieldText, current_sink

# Both must be set before dspy is imported: no cost-map download, and a cache DSPy finds again.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("DSPY_CACHEDIR", str(cache_root() / "dspy"))

import dspy
from dspy.lm15 import Message, Response, TextPart, Usage, response_to_events
from dspy._vendor.lm15.types import TokenLogprob, TopLogprob
from program.guards.caps import QuestionCaps
from program.lm.retry import RetryingLM

DEFAULT_MODEL = "embedded-1.5b"
# Grading, strip relevance and support checks are critiques: deterministic (docs/how-it-works.md).
CRITIQUE_CONFIG = {"temperature": 0.0}
# The program's default for every call, answers included: a compiled program answers the same way twice.
TEMPERATURE = 0.0


class LlamaCppEngine:
    """A DSPy engine running a GGUF model in-process through ``xllamacpp.Server``.

    Args:
        model_path: path of the ``.gguf`` file.
        n_ctx: context window per slot, in tokens (default 4096).
        slots: KV-cache slots (default 6). Calls run one at a time, but each slot keeps the
            last prompt it saw and llama.cpp picks the slot sharing the longest prefix, so
            each signature's instructions stay cached and a call pays only for its new tokens.
        n_threads: CPU threads (default: all cores).
    """

    logprobs = True  # returns token log probabilities when a request asks (``Config.logprobs``)
    streams_words = True  # streams the reader's calls itself (``program.lm.words``): DSPy's stream stays off

    def __init__(self, model_path: str | Path, n_ctx: int = 4096, slots: int = 6, n_threads: int | None = None):
        # lazy on purpose: the llama.cpp engine loads only with an embedded model
        import xllamacpp as xlc

        params = xlc.CommonParams()
        params.model.path = str(model_path)
        params.n_ctx = n_ctx * slots
        params.n_parallel = slots
        threads = n_threads or os.cpu_count() or 2
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        params.verbosity = -1
        self.model_path = str(model_path)
        self._server = xlc.Server(params)
        self._lock = threading.Lock()

    def complete(self, request) -> Response:
        messages = []
        if request.system is not None:
            system = request.system if isinstance(request.system, str) else "".join(p.text for p in request.system)
            messages.append({"role": "system", "content": system})
        messages.extend({"role": m.role, "content": m.text or ""} for m in request.messages)
        body = {"messages": messages, "max_tokens": request.config.max_tokens or 512}
        if request.config.temperature is not None:
            body["temperature"] = request.config.temperature
        if request.config.stop:
            body["stop"] = list(request.config.stop)
        if request.config.seed is not None:
            body["seed"] = request.config.seed
        if request.config.logprobs is not None:  # a judge's score from token probabilities
            body["logprobs"] = True
            body["top_logprobs"] = request.config.logprobs
        sink = current_sink()
        with self._lock:
            out = self._server.handle_chat_completions(body) if sink is None else _streamed(self._server, body, sink)
        if "error" in out:
            raise RuntimeError(f"llama.cpp error: {out['error']}")
        choice = out["choices"][0]
        usage = out.get("usage", {})
        return Response(
            id=out.get("id"),
            model=Path(self.model_path).name,
            message=Message.assistant([TextPart(choice["message"].get("content") or "")]),
            finish_reason="length" if choice.get("finish_reason") == "length" else "stop",
            usage=Usage(input_tokens=usage.get("prompt_tokens", 0), output_tokens=usage.get("completion_tokens", 0),
                        cache_read_tokens=cached_tokens(usage)),
            logprobs=_token_logprobs(choice.get("logprobs")) if request.config.logprobs is not None else None,
        )

    def stream(self, request):
        return response_to_events(self.complete(request))

    def close(self) -> None:
        pass


def _streamed(server, body: dict, sink) -> dict:
    """``handle_chat_completions`` streamed: each piece's text goes to ``sink`` (only the answer
    field's, ``program.lm.words.FieldText``) as llama.cpp writes it; returns the whole response as
    the unstreamed call would (content, finish reason, token log probabilities, usage)."""
    text, logprobs, finish, usage, errors = [], [], None, {}, []
    field = FieldText(sink)

    def on_chunk(chunk) -> bool:
        nonlocal finish, usage
        if "error" in chunk:
            errors.append(chunk["error"])
            return False
        for choice in chunk.get("choices") or []:
            piece = (choice.get("delta") or {}).get("content") or ""
            text.append(piece)
            field.feed(piece)
            logprobs.extend(((choice.get("logprobs") or {}).get("content")) or [])
            finish = choice.get("finish_reason") or finish
        usage = chunk.get("usage") or usage
        return False  # go on

    server.handle_chat_completions({**body, "stream": True, "stream_options": {"include_usage": True}}, on_chunk)
    if errors:
        return {"error": errors[0]}
    return {"choices": [{"message": {"content": "".join(text)}, "finish_reason": finish,
                         "logprobs": {"content": logprobs} if body.get("logprobs") else None}], "usage": usage}


def cached_tokens(usage: dict) -> int:
    """Of a llama.cpp response's prompt tokens, those its slot's cache served (not read again):
    ``usage.prompt_tokens_details.cached_tokens``, 0 when absent."""
    return int(((usage or {}).get("prompt_tokens_details") or {}).get("cached_tokens") or 0)


def _token_logprobs(logprobs: dict | None) -> tuple[TokenLogprob, ...] | None:
    """llama.cpp's OpenAI-style ``choices[0].logprobs`` as lm15's ``TokenLogprob`` tuple."""
    if not logprobs:
        return None
    return tuple(TokenLogprob(token=e["token"], logprob=float(e["logprob"]),
                              top=tuple(TopLogprob(token=t["token"], logprob=float(t["logprob"]))
                                        for t in e.get("top_logprobs") or ()))
                 for e in logprobs.get("content") or ())


def supports_logprobs(lm=None) -> bool:
    """True when ``lm`` (default: DSPy's configured LM) returns token log probabilities: a
    custom engine that says so (``logprobs = True``, as ``LlamaCppEngine``), or an
    OpenAI-compatible server. Other providers may refuse the option."""
    lm = lm or dspy.settings.lm
    if getattr(getattr(lm, "engine", None), "logprobs", False) is True:
        return True
    name = getattr(lm, "model", "") or ""
    return isinstance(name, str) and name.startswith(("openai/", "hosted_vllm/"))


_ENGINES: dict[str, LlamaCppEngine] = {}


def build_lm(model: str | None = None, api_base: str | None = None, max_tokens: int = 512,
             cache: bool = True) -> dspy.LM:
    """Build the DSPy LM for ``model`` (see the module docstring for the order of choice).

    Args:
        model: ``embedded-1.5b``, ``embedded-0.5b``, or a DSPy model string.
        api_base: base URL for a served model (``CRAG_API_BASE`` otherwise).
        max_tokens: completion cap per call.
        cache: False bypasses DSPy's cache for this LM's calls (``--no-cache``: cost figures).

    Returns:
        A ``dspy.LM`` at temperature 0 (``TEMPERATURE``; a call may ask for another); its
        ``history`` holds each call's usage. A served ``openai/NAME`` at ``api_base`` with no key
        set gets a placeholder key (``api_key``): a self-hosted server needs none.

    Raises:
        program.lm.model_files.ModelFilesError: the embedded model's chunk wheels are missing.
        ValueError: a model that is none (``model_files.model_problem``: an unknown
            ``embedded-...``, a name without its provider), or a cap variable (``CRAG_LM_RETRIES``,
            ``CRAG_LM_TIMEOUT``) that is not a number.
    """
    model = model or os.environ.get("CRAG_LM") or DEFAULT_MODEL
    if problem := model_problem(model):
        raise ValueError(f"model {model!r}: {problem}")
    if model in EMBEDDED_MODELS:
        if model not in _ENGINES:
            _ENGINES[model] = LlamaCppEngine(ensure_model_file(model))
        return RetryingLM(f"local/{model}", engine=_ENGINES[model], max_tokens=max_tokens, retries=0, timeout=None,
                          temperature=TEMPERATURE, cache=cache)
    caps = QuestionCaps.from_env()
    api_base = api_base or os.environ.get("CRAG_API_BASE")
    key = api_key(model, api_base)
    return RetryingLM(model, api_base=api_base, retries=caps.lm_retries, timeout=caps.lm_timeout, cache=cache,
                      max_tokens=max_tokens, temperature=TEMPERATURE, **({"api_key": key} if key else {}))


# the key sent to a self-hosted OpenAI-compatible server when none is set: vLLM's, llama.cpp's and
# LM Studio's servers take none and ignore it (DSPy's own hosted_vllm/ and ollama_chat/ do the same)
PLACEHOLDER_KEY = "EMPTY"


def api_key(model: str, api_base: str | None) -> str | None:
    """The key to send a served ``model``: ``CRAG_API_KEY`` when set; else, for ``openai/NAME`` at
    an ``api_base`` (a local server: vLLM, llama.cpp, LM Studio) without ``OPENAI_API_KEY``,
    ``PLACEHOLDER_KEY``, since DSPy refuses to call an ``openai/`` model with no key at all; else
    None (the provider's own variable, which DSPy reads). Raises nothing."""
    if os.environ.get("CRAG_API_KEY"):
        return os.environ["CRAG_API_KEY"]
    if api_base and model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        return PLACEHOLDER_KEY
    return None


def missing_key(model: str | None = None, api_base: str | None = None) -> str | None:
    """One line naming the key a served ``model`` needs and the environment lacks, else None.

    Checked before anything loads, so that ``ask`` and ``serve`` stop at once (exit 2) instead of
    answering every question with the provider's 401. The embedded models need none; neither does
    a model at ``api_base`` (a self-hosted server: vLLM, SGLang, Ollama usually take no key) or
    one given ``CRAG_API_KEY``. The provider's own variables are litellm's
    (``litellm.validate_environment``)."""
    model = model or os.environ.get("CRAG_LM") or DEFAULT_MODEL
    if model in EMBEDDED_MODELS or api_base or os.environ.get("CRAG_API_BASE") or os.environ.get("CRAG_API_KEY"):
        return None
    # lazy on purpose: only a served model's check needs it
    import litellm

    try:
        found = litellm.validate_environment(model=model)
    except Exception:  # an unknown provider: its first call will say what it lacks
        return None
    keys = [k for k in found.get("missing_keys") or [] if not k.endswith("_API_BASE")]
    if found.get("keys_in_environment") or not keys:
        return None
    return f"--model {model} needs a key: set {' or '.join(keys)} (or CRAG_API_KEY)"


def configure_lm(model: str | None = None, api_base: str | None = None, cache: bool = True) -> dspy.LM:
    """Build the LM (see ``build_lm``) and make it DSPy's global LM."""
    lm = build_lm(model, api_base, cache=cache)
    dspy.configure(lm=lm)
    return lm


def model_name(lm: dspy.LM | None = None) -> str:
    """The configured LM's name, for manifests and reports."""
    lm = lm or dspy.settings.lm
    return getattr(lm, "model", str(lm)).removeprefix("local/")
