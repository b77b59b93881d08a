"""The command line's flags checked before anything loads: ranges, ports, URLs, files.

Every check raises ``SetupError`` with one line naming the flag and the problem; the CLI prints
it and exits 2. Light on purpose (no DSPy, no torch): it runs before the model or the index loads.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from program.lm.model_files import model_problem

MAX_K = 20  # passages per question, on the command line and over HTTP alike
COMPILED_FILES = ("crag.json", "manifest.json")  # what program.app.compiled.has_compiled looks for


class SetupError(Exception):
    """A flag, file or backend the program cannot start with; the message is one line for the user."""


def in_range(flag: str, value, low: float, high: float, *, above: bool = False) -> None:
    """Raise ``SetupError`` unless ``value`` is a finite number in ``[low, high]`` (``(low, high]``
    with ``above``); None (the flag left out) passes."""
    if value is None:
        return
    if math.isfinite(value) and (value > low if above else value >= low) and value <= high:
        return
    lowest = f"more than {low:g}" if above else f"at least {low:g}"
    raise SetupError(f"{flag} must be {lowest} and at most {high:g}, got {value:g}")


def check_k(k: int | None) -> None:
    """``-k``: 1 to ``MAX_K`` passages. Raises ``SetupError``."""
    in_range("-k", k, 1, MAX_K)


def check_url(flag: str, value: str | None) -> None:
    """An http(s) URL with a host, or None. Raises ``SetupError``."""
    if value is None:
        return
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise SetupError(f"{flag} must be an http:// or https:// URL with a host, got {value!r}")


def _shown(value: str) -> str:
    """``value`` as typed when it is one printable word, else quoted (``'gpt 4'``)."""
    return value if value.isprintable() and not any(c.isspace() for c in value) else repr(value)


def check_model(flag: str | None) -> None:
    """The model ``--model`` (``flag``), else ``CRAG_LM``, names: an embedded one or a served
    ``provider/name`` (``program.lm.model_files.model_problem``); neither given passes (the
    embedded default). Raises ``SetupError`` naming the flag or variable: an unknown
    ``embedded-...`` (listing ours), an empty one, one without its provider."""
    if flag is not None:
        where, value = "--model", flag
    elif "CRAG_LM" in os.environ:
        where, value = "CRAG_LM", os.environ["CRAG_LM"]
    else:
        return
    problem = model_problem(value)
    if problem is None:
        return
    if not value.strip():
        raise SetupError(f"{where} is {'set but ' if where == 'CRAG_LM' else ''}{problem}")
    raise SetupError(f"{where} {_shown(value)}: {problem}")


def kb_setting(flag: str | None) -> str | None:
    """The knowledge base the command line names: ``--kb`` (``flag``), else ``CRAG_KB``, else None
    (the PopQA knowledge base).

    Raises:
        SetupError: ``--kb ""``, or ``CRAG_KB`` set but empty. Either would otherwise serve the
            PopQA knowledge base, which nobody asked for."""
    if flag is not None:
        if flag == "":
            raise SetupError("--kb is empty; give a corpus file or folder or a postgresql:// URL, or leave --kb out")
        return flag
    value = os.environ.get("CRAG_KB")
    if value == "":
        raise SetupError("CRAG_KB is set but empty; set it to a corpus file or folder or a postgresql:// URL, "
                         "or unset it")
    return value


def check_appendable(flag: str, value: str | None) -> None:
    """A file the program may append to, in a folder that exists: a missing folder is refused,
    never made (``/nonexistent/dir/x.jsonl`` would make folders at the filesystem's root). The
    file is created empty when missing. Raises ``SetupError``."""
    if value is None:
        return
    path = Path(value)
    if not path.parent.is_dir():
        problem = "is not a folder" if path.parent.exists() else "does not exist"
        raise SetupError(f"{flag} {value}: the folder {path.parent} {problem}; give a file in an existing folder")
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise SetupError(f"{flag} {value}: cannot write to it: {exc.strerror or exc}") from None


def check_serve_flags(args) -> None:
    """``serve``'s own flags: port, host, concurrency, queue, timeouts. Raises ``SetupError``."""
    in_range("--port", args.port, 1, 65535)
    if not args.host or any(c.isspace() for c in args.host):
        raise SetupError(f"--host must be an address or host name, got {args.host!r}")
    in_range("--concurrency", args.concurrency, 1, 256)
    in_range("--max-queue", args.max_queue, 0, 10_000)
    in_range("--timeout", args.timeout, 0, 86_400, above=True)
    in_range("--read-timeout", args.read_timeout, 0, 3_600, above=True)
    in_range("--reload-interval", getattr(args, "reload_interval", None), 0, 86_400)
    check_access(args)


MIN_KEY_CHARS = 16


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``127.0.0.0/8`` and ``::1``: a server only this machine reaches."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def serve_key(args) -> str | None:
    """The service's bearer key: ``--api-key``, else ``CRAG_SERVE_API_KEY``, else None."""
    return getattr(args, "api_key", None) or os.environ.get("CRAG_SERVE_API_KEY") or None


def keys_file(args) -> str | None:
    """The service's keys file: ``--keys``, else ``CRAG_SERVE_KEYS``, else None."""
    return getattr(args, "keys", None) or os.environ.get("CRAG_SERVE_KEYS") or None


HOST_FORMS = ("each a host name or address without scheme, port or path: example.com, 10.0.0.5, "
              ".example.com (it and its subdomains), * (any host)")
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?")


def _host_problem(item: str) -> str | None:
    """Why ``item`` (stripped, lower case) can never match a ``Host`` header, or None."""
    if not item:
        return "an empty item"
    if "://" in item:
        return f"{item!r} has a scheme"
    if "/" in item or "?" in item or "#" in item:
        return f"{item!r} has a path"
    bare = item[1:-1] if item.startswith("[") and item.endswith("]") else item
    try:
        ipaddress.ip_address(bare)
        return None
    except ValueError:
        pass
    if ":" in item:
        return f"{item!r} has a port"
    if item == "*" or _HOST_NAME.fullmatch(item.removeprefix("*.").removeprefix(".")):
        return None
    return f"{item!r} is not a host name"


def allowed_hosts(value: str | None, where: str = "--allowed-hosts") -> frozenset[str]:
    """The items of ``value`` (comma-separated, as ``--allowed-hosts`` or ``CRAG_ALLOWED_HOSTS``
    gives them), lower case: a name or address (``[v6]`` unbracketed), ``.example.com`` for it and
    its subdomains (``*.example.com`` is the same), or ``*`` for any host. None: no items.

    Raises:
        SetupError: an item that could never match a ``Host`` header (a scheme, a port, a path, an
            empty item, another wildcard), one line naming ``where`` and the accepted form."""
    if value is None:
        return frozenset()
    items = set()
    for item in value.split(","):
        item = item.strip().lower()
        problem = _host_problem(item)
        if problem:
            raise SetupError(f"{where}: {problem}; give comma-separated hosts, {HOST_FORMS}")
        items.add("." + item[2:] if item.startswith("*.") else item.strip("[]"))
    return frozenset(items)


def check_access(args) -> None:
    """A key that is long enough and one line; no key on a host other machines reach unless
    ``--no-api-key`` says so; ``--allowed-hosts`` (else ``CRAG_ALLOWED_HOSTS``) as
    ``allowed_hosts`` reads it. Raises ``SetupError``."""
    flag = getattr(args, "allowed_hosts", None)
    if flag is not None:
        allowed_hosts(flag)
    else:
        allowed_hosts(os.environ.get("CRAG_ALLOWED_HOSTS") or None, "CRAG_ALLOWED_HOSTS")
    key = serve_key(args)
    where = "--api-key" if getattr(args, "api_key", None) else "CRAG_SERVE_API_KEY"
    if key is not None and (len(key) < MIN_KEY_CHARS or any(c.isspace() or not c.isprintable() for c in key)):
        raise SetupError(f"{where}: a key needs at least {MIN_KEY_CHARS} characters and no spaces")
    if (key or keys_file(args)) and getattr(args, "no_api_key", False):
        raise SetupError("--no-api-key: a key is set too; choose one")
    if key is None and keys_file(args) is None and not is_loopback(args.host) and not getattr(args, "no_api_key",
                                                                                               False):
        raise SetupError(f"--host {args.host}: other machines could ask without a key; set CRAG_SERVE_API_KEY "
                         "(or --api-key), or --no-api-key to serve without one")


def check_embedder(flag: str | None) -> None:
    """The embedder ``--embedder`` (``flag``), else ``CRAG_EMBEDDER``, names: ``BASE_URL#MODEL``
    of an OpenAI-compatible embeddings server, or ``local``; for a server also its settings
    (``embedder_spec.settings_from_env``). Neither given passes (the in-process all-MiniLM-L6-v2).
    Nothing is contacted. Raises ``SetupError`` naming the flag or variable."""
    if flag == "":
        raise SetupError("--embedder is empty; give BASE_URL#MODEL, or 'local', or leave it out")
    where, value = ("--embedder", flag) if flag is not None else ("CRAG_EMBEDDER", os.environ.get("CRAG_EMBEDDER"))
    if value is None:
        return
    # lazy on purpose: only a command line naming an embedder imports the retrieval package (no model loads)
    from program.retrieval.embedder_spec import parse_spec, settings_from_env

    try:
        if parse_spec(value) is not None:
            settings_from_env()
    except ValueError as exc:
        raise SetupError(f"{where} {exc}" if str(exc).startswith("must be") else str(exc)) from None


def check_state(value: str) -> None:
    """``--state DIR``: a folder, or a path where one can be made (not a file; its nearest existing
    parent writable). Creates nothing. Raises ``SetupError``."""
    path = Path(value)
    if not value.strip():
        raise SetupError("--state is empty; give a folder, or leave --state out")
    if path.exists() and not path.is_dir():
        raise SetupError(f"--state {value}: is a file, not a folder")
    existing = next((p for p in [path, *path.absolute().parents] if p.exists()), None)
    if existing is None or not os.access(existing, os.W_OK):
        raise SetupError(f"--state {value}: {existing} is not writable")


def check_program_flags(args) -> None:
    """The flags ``ask`` and ``serve`` share that need nothing loaded: ``-k``, the model's name, the
    LM's URL, the embedder, the trace file. Raises ``SetupError``."""
    check_k(args.k)
    check_model(args.model)
    check_url("--api-base", args.api_base)
    check_embedder(getattr(args, "embedder", None))
    check_appendable("--trace-jsonl", args.trace_jsonl)


def check_index_flags(args) -> None:
    """``index``'s flags: counts, the time cap, the decline share, the model's name, the knowledge
    base's (not empty), the embedder, the output folder, the compile. Raises ``SetupError``."""
    in_range("--questions", args.questions, 0, 10_000)
    in_range("--time-cap", args.time_cap, 0, 86_400, above=True)
    in_range("--operating-questions", args.operating_questions, 1, 10_000)
    if not (math.isfinite(args.decline) and 0.0 <= args.decline < 1.0):
        raise SetupError(f"--decline must be at least 0 and less than 1, got {args.decline:g}")
    check_model(args.model)
    kb_setting(args.kb)
    check_url("--api-base", args.api_base)
    check_embedder(getattr(args, "embedder", None))
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise SetupError(f"--out {args.out}: is a file, not a folder")
    if args.compiled and not all((Path(args.compiled) / name).is_file() for name in COMPILED_FILES):
        raise SetupError(f"--compiled {args.compiled}: no compiled program there")


def use_embedder(args) -> None:
    """Make ``--embedder`` the knowledge bases' embedder for this process
    (``program.retrieval.embedder_choice.configure_embedder``); without it ``CRAG_EMBEDDER`` decides,
    else the in-process all-MiniLM-L6-v2. Nothing is contacted. Raises ``SetupError`` (checked
    already by ``check_embedder``)."""
    # lazy on purpose: the retrieval package loads after the flags' checks, and only for a command that needs it
    from program.retrieval.embedder_choice import configure_embedder

    try:
        configure_embedder(args.embedder)
    except ValueError as exc:
        raise SetupError(f"--embedder {exc}" if str(exc).startswith("must be") else str(exc)) from None
