"""The one HTTP layer the search backends share: a retrying session, and requests whose every
failure becomes a ``WebSearchError`` naming the backend and what to set.

Retries are urllib3's ``Retry`` on an ``HTTPAdapter``: connection errors, read timeouts and
HTTP 429/500/502/503/504 are retried ``config.retries`` times with exponential back-off
(``config.backoff * 2**(n-1)`` seconds, at most 10 s; a server's Retry-After is not obeyed, so a
search never sleeps longer than that).

``get_at`` fetches a URL from the address the safety check vetted (``PinnedAdapter``), so that no
second DNS lookup decides where the connection goes.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import NewConnectionError
from urllib3.exceptions import TimeoutError as Urllib3Timeout
from urllib3.util.retry import Retry

from program.web.base import WebSearchError
from program.web.config import WebConfig

_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def _adapter(config: WebConfig, cls: type[HTTPAdapter] = HTTPAdapter, **kwargs) -> HTTPAdapter:
    retry = Retry(total=config.retries, connect=config.retries, read=config.retries, status=config.retries,
                  other=0, backoff_factor=config.backoff, backoff_max=10.0,
                  status_forcelist=(429, 500, 502, 503, 504),
                  allowed_methods=frozenset({"GET", "HEAD", "POST"}),  # a search is idempotent
                  raise_on_status=False, respect_retry_after_header=False)
    return cls(max_retries=retry, pool_maxsize=max(4, config.fetch_workers), **kwargs)


def make_session(config: WebConfig) -> requests.Session:
    """A ``requests.Session`` with capped retries and back-off, the configured User-Agent and redirect cap."""
    adapter = _adapter(config)
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = config.user_agent
    session.max_redirects = config.max_redirects
    return session


class PinnedAdapter(HTTPAdapter):
    """An ``HTTPAdapter`` for URLs that name an IP address in place of ``hostname``: TLS still sends
    ``hostname`` (SNI) and checks the certificate against it, not against the address."""

    def __init__(self, hostname: str, **kwargs):
        self.hostname = hostname  # read by init_poolmanager, which HTTPAdapter.__init__ calls
        super().__init__(**kwargs)

    def init_poolmanager(self, *args, **pool_kwargs):
        # urllib3 drops both keywords for plain http
        pool_kwargs.update(server_hostname=self.hostname, assert_hostname=self.hostname)
        super().init_poolmanager(*args, **pool_kwargs)


def get_at(session: requests.Session, config: WebConfig, url: str, address, **kwargs) -> requests.Response:
    """GET ``url`` from the server at ``address`` (an ``ipaddress`` address), with no new DNS lookup.

    The safety check resolved the URL's host and vetted every address; connecting by name would
    resolve it again, and a DNS server may answer differently the second time (DNS rebinding).
    So the request goes to the vetted address, with the URL's host in the Host header, the TLS
    server name and the certificate check. ``address`` None (private addresses allowed, nothing
    vetted): an ordinary GET. ``kwargs`` go to ``session.get``; its errors are requests' own.
    """
    if address is None:
        return session.get(url, **kwargs)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or (443 if scheme == "https" else 80)
    host = f"[{address}]" if address.version == 6 else str(address)
    try:
        name = parts.hostname.encode("idna").decode("ascii")
    except UnicodeError:
        name = parts.hostname
    session.mount(f"{scheme}://{host}:{port}/", _adapter(config, PinnedAdapter, hostname=name))
    direct = urlunsplit((scheme, f"{host}:{port}", parts.path or "/", parts.query, ""))
    headers = {**kwargs.pop("headers", {}), "Host": parts.netloc.rsplit("@", 1)[-1]}
    return session.get(direct, headers=headers, **kwargs)


def short_url(url: str) -> str:
    """The URL without its query string and fragment (queries carry user text; keep messages short)."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))


def is_timeout(exc: Exception) -> bool:
    """True for a timeout, including one that exhausted the retries (requests reports that as a
    ``ConnectionError`` wrapping urllib3's ``MaxRetryError(ReadTimeoutError)``)."""
    if isinstance(exc, requests.exceptions.Timeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    if isinstance(reason, NewConnectionError):  # a subclass of urllib3's TimeoutError, but a refusal
        return "timed out" in str(reason).lower()
    return isinstance(reason, (TimeoutError, Urllib3Timeout))


def describe(exc: Exception) -> str:
    """A one-line reason for a ``requests`` exception: the OS error if there is one, else the class name."""
    found = _ERRNO.search(str(exc))
    return found.group(1).strip() if found else type(exc).__name__


def request(session: requests.Session, backend: str, method: str, url: str, *, timeout, hint: str = "",
            auth_hint: str = "", **kwargs) -> requests.Response:
    """Send one request; return the response when its status is below 400.

    Args:
        hint: what to set when the service cannot be reached (e.g. "set SEARXNG_URL").
        auth_hint: what to set when the service refuses the request (HTTP 401/403).
        **kwargs: passed to ``session.request`` (``params``, ``json``, ``headers``, ``data``).

    Raises:
        WebSearchError: timeout, connection failure, HTTP 4xx/5xx (after the capped retries).
    """
    where = short_url(url)
    tail = f"; {hint}" if hint else ""
    try:
        response = session.request(method, url, timeout=timeout, **kwargs)
    except requests.RequestException as exc:
        if is_timeout(exc):
            raise WebSearchError(backend, f"{where} did not answer within {timeout[1]:g} s{tail}") from exc
        if isinstance(exc, requests.exceptions.ConnectionError):
            raise WebSearchError(backend, f"cannot reach {where} ({describe(exc)}){tail}") from exc
        raise WebSearchError(backend, f"request to {where} failed ({describe(exc)}){tail}") from exc
    status = response.status_code
    if status in (401, 403):
        raise WebSearchError(backend, f"HTTP {status} from {where}: the request was refused"
                             + (f"; {auth_hint}" if auth_hint else tail))
    if status == 429:
        raise WebSearchError(backend, f"HTTP 429 from {where}: rate limited; try again later")
    if status >= 400:
        raise WebSearchError(backend, f"HTTP {status} from {where}{tail}")
    return response


def request_json(session: requests.Session, backend: str, method: str, url: str, *, timeout, hint: str = "",
                 auth_hint: str = "", **kwargs) -> dict:
    """Like :func:`request`, then parse a JSON object.

    Raises:
        WebSearchError: as :func:`request`, or the body is not a JSON object.
    """
    response = request(session, backend, method, url, timeout=timeout, hint=hint, auth_hint=auth_hint, **kwargs)
    try:
        data = response.json()
    except ValueError as exc:
        kind = response.headers.get("Content-Type", "unknown type")
        raise WebSearchError(backend, f"the response from {short_url(url)} is not JSON ({kind})"
                             + (f"; {hint}" if hint else "")) from exc
    if not isinstance(data, dict):
        raise WebSearchError(backend, f"the response from {short_url(url)} is not a JSON object")
    return data


def require_key(backend: str, key: str, variable: str) -> str:
    """Return ``key``, or raise ``WebSearchError(backend, "<variable> is not set ...")`` when it is empty."""
    if not key or not key.strip():
        raise WebSearchError(backend, f"{variable} is not set; export {variable}=<your {backend} API key>")
    return key.strip()


def require_list(backend: str, data: dict, *path: str) -> list:
    """``data[path[0]][path[1]]...`` as a list; raise ``WebSearchError`` if a level is missing or not a list."""
    value = data
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
        if value is None:
            raise WebSearchError(backend, f"unexpected response: no {'.'.join(path)} field")
    if not isinstance(value, list):
        raise WebSearchError(backend, f"unexpected response: {'.'.join(path)} is not a list")
    return value
