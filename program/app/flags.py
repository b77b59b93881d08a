"""The command line's flags checked before anything loads: ranges, ports, URLs, files.

Every check raises ``SetupError`` with one line naming the flag and the problem; the CLI prints
it and exits 2. Light on purpose (no DSPy, no torch): it runs before the model or the index loads.
"""

from __future__ import annotations

import ipaddress
import math
import os
from pathlib import Path
from urllib.parse import urlsplit

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


def check_appendable(flag: str, value: str | None) -> None:
    """A file the program may append to (its folder created when missing). Raises ``SetupError``."""
    if value is None:
        return
    path = Path(value)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
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


def check_access(args) -> None:
    """A key that is long enough and one line; no key on a host other machines reach unless
    ``--no-api-key`` says so. Raises ``SetupError``."""
    key = serve_key(args)
    where = "--api-key" if getattr(args, "api_key", None) else "CRAG_SERVE_API_KEY"
    if key is not None and (len(key) < MIN_KEY_CHARS or any(c.isspace() or not c.isprintable() for c in key)):
        raise SetupError(f"{where}: a key needs at least {MIN_KEY_CHARS} characters and no spaces")
    if key and getattr(args, "no_api_key", False):
        raise SetupError("--no-api-key: a key is set too; choose one")
    if key is None and not is_loopback(args.host) and not getattr(args, "no_api_key", False):
        raise SetupError(f"--host {args.host}: other machines could ask without a key; set CRAG_SERVE_API_KEY "
                         "(or --api-key), or --no-api-key to serve without one")


def check_program_flags(args) -> None:
    """The flags ``ask`` and ``serve`` share that need nothing loaded: ``-k``, the LM's URL, the
    trace file. Raises ``SetupError``."""
    check_k(args.k)
    check_url("--api-base", args.api_base)
    check_appendable("--trace-jsonl", args.trace_jsonl)


def check_index_flags(args) -> None:
    """``index``'s flags: counts, the time cap, the decline share, the output folder, the compile.
    Raises ``SetupError``."""
    in_range("--questions", args.questions, 0, 10_000)
    in_range("--time-cap", args.time_cap, 0, 86_400, above=True)
    in_range("--operating-questions", args.operating_questions, 1, 10_000)
    if not (math.isfinite(args.decline) and 0.0 <= args.decline < 1.0):
        raise SetupError(f"--decline must be at least 0 and less than 1, got {args.decline:g}")
    check_url("--api-base", args.api_base)
    if args.out and Path(args.out).exists() and not Path(args.out).is_dir():
        raise SetupError(f"--out {args.out}: is a file, not a folder")
    if args.compiled and not all((Path(args.compiled) / name).is_file() for name in COMPILED_FILES):
        raise SetupError(f"--compiled {args.compiled}: no compiled program there")
