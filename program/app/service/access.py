"""Who may reach the service: the bearer keys and the hosts it answers for.

A key (``serve --api-key`` or ``CRAG_SERVE_API_KEY``, reading everything; or one of the keys file's,
``serve --keys``, each reading what its entry allows: ``program.app.service.keys``) is required as
``Authorization: Bearer KEY`` on every route but ``/healthz`` and the page's own files (``/``,
``/page/…``: static, no data; the page asks for the key and sends it). It is compared in constant
time; a missing or wrong key is a 401 with ``WWW-Authenticate: Bearer``. Who the key names (a
``Principal``) is put in the request's state (``request.state.principal``) for the endpoints.

The ``Host`` header must name a host the server answers for: the address it is bound to, the
loopback names when it is bound to loopback, and the operator's ``--allowed-hosts``. A page
elsewhere that renames its own domain to 127.0.0.1 (DNS rebinding) sends its own name as
``Host`` and is refused (400). A browser's ``Origin``, when sent, must name such a host too
(403): a page on another site cannot make a visitor's browser ask. ``--allowed-hosts`` takes
Django's ``ALLOWED_HOSTS`` forms: ``.example.com`` (or ``*.example.com``) is example.com and its
subdomains, ``*`` any host; an item that could never match (a scheme, a port, a path) is refused
at start (``program.app.flags.allowed_hosts``).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from urllib.parse import urlsplit

from program.app.flags import allowed_hosts, is_loopback
from program.app.service.keys import ANYONE, OPERATOR, KeysFile, Principal
from program.app.service.limits import error_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
OPEN_PATHS = ("/healthz",)  # answered without a key: what a load balancer probes
PAGE_PATHS = ("/", "/favicon.ico")  # the page's static files: no data in them
PAGE_PREFIX = "/page/"


def host_of(value: str) -> str:
    """The host part of a ``Host`` header (``name``, ``name:port``, ``[v6]:port``), lower case."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass(frozen=True)
class Access:
    """The service's access rules.

    Attributes:
        key: the bearer key clients must send, or None for none (loopback, or the operator's
            explicit ``--no-api-key``).
        hosts: the host names and addresses ``Host`` and ``Origin`` may name, lower case, where
            ``.example.com`` is example.com and its subdomains and ``*`` any host; empty means any
            (a server bound to every address with no ``--allowed-hosts``).
    """

    key: str | None = None
    hosts: frozenset[str] = frozenset()
    keys: KeysFile | None = None

    @classmethod
    def for_server(cls, bound: str, key: str | None, allowed: str | None = None,
                   keys: KeysFile | None = None) -> Access:
        """The rules for a server bound to ``bound``: its own address, the loopback names when it
        is loopback, and ``allowed`` (comma-separated names). A server bound to every address
        (``0.0.0.0``, ``::``) answers any ``Host`` unless ``allowed`` names them.

        Raises:
            program.app.flags.SetupError: an item of ``allowed`` that could never match."""
        listed = set(allowed_hosts(allowed or None))
        bound = bound.strip("[]").lower()
        if bound in WILDCARDS:
            return cls(key or None, frozenset(listed | set(LOOPBACK_NAMES)) if listed else frozenset(), keys)
        names = {bound} | (set(LOOPBACK_NAMES) if is_loopback(bound) else set())
        return cls(key or None, frozenset(names | listed), keys)

    def _serves(self, name: str) -> bool:
        if not self.hosts or "*" in self.hosts or name in self.hosts:
            return True
        # ".example.com": example.com and every name ending in ".example.com"
        return any(item.startswith(".") and (name == item[1:] or name.endswith(item)) for item in self.hosts)

    def host_allowed(self, host: str) -> bool:
        """True when the ``Host`` header ``host`` names a host these rules serve."""
        return self._serves(host_of(host))

    def origin_allowed(self, origin: str) -> bool:
        """True when a browser's ``Origin`` names a host these rules serve."""
        # "null" (a sandboxed frame, a file) names no host: refused where hosts are named (but for "*")
        return self._serves((urlsplit(origin).hostname or "").lower())

    def principal(self, authorization: str) -> Principal | None:
        """Who ``authorization`` (``Bearer <key>``) names: the operator for the one key, a keys
        file's entry for one of its keys, anyone on a server without keys; None for a missing or
        wrong key (constant time)."""
        if self.key is None and self.keys is None:
            return ANYONE
        scheme, _, given = authorization.partition(" ")
        given = given.strip()
        # compare_digest takes as long for a wrong key of any length as for the right one's length
        operator = self.key is not None and hmac.compare_digest(given.encode(), self.key.encode())
        listed = self.keys.principal(given) if self.keys is not None else None
        if scheme.lower() != "bearer":
            return None
        return OPERATOR if operator else listed

    def key_matches(self, authorization: str) -> bool:
        """True when ``authorization`` names someone (``principal``)."""
        return self.principal(authorization) is not None


def _needs_key(path: str) -> bool:
    return not (path in OPEN_PATHS or path in PAGE_PATHS or path.startswith(PAGE_PREFIX))


class AccessControl:
    """ASGI middleware applying ``Access`` before anything else reads the request."""

    def __init__(self, app, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        principal = self.access.principal(headers.get("authorization", ""))
        refusal = self.refusal(scope["path"], headers, principal)
        if refusal is None:
            scope.setdefault("state", {})["principal"] = principal
            return await self.app(scope, receive, send)
        status, detail, extra = refusal
        await error_response(scope["path"], status, detail, extra)(scope, receive, send)

    def refusal(self, path: str, headers: dict[str, str], principal: Principal | None) -> tuple[int, str, dict] | None:
        """``(status, one line, headers)`` for a request these rules refuse (``principal``: who
        its key names, None for none), else None."""
        host = headers.get("host", "")
        if not self.access.host_allowed(host):
            return 400, f"host {host_of(host)!r} is not served here (serve --allowed-hosts adds names)", {}
        origin = headers.get("origin")
        if origin is not None and not self.access.origin_allowed(origin):
            return 403, f"origin {origin!r} may not call this service", {}
        if _needs_key(path) and principal is None:
            said = "a wrong" if headers.get("authorization") else "no"
            return 401, f"{said} API key: send Authorization: Bearer <key>", {"WWW-Authenticate": "Bearer"}
        return None
