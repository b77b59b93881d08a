"""Sentence embeddings from a server that speaks OpenAI's embeddings API.

Text Embeddings Inference, vLLM, Infinity, Ollama, llama.cpp's server and hosted APIs answer
``POST {base}/embeddings`` with ``{"model": NAME, "input": [texts]}`` by
``{"data": [{"index": i, "embedding": [floats]}, ...]}``. :class:`ServedEmbedder` has the
interface of :class:`program.retrieval.embedding.Embedder` (``name``, ``dimensions``,
``encode``, ``load``), so a knowledge base takes it through its ``embedder=`` parameter.

A server is named by a spec, ``BASE_URL#MODEL`` (:func:`program.retrieval.embedder_spec.parse_spec`)::

    http://127.0.0.1:8080/v1#BAAI/bge-small-en-v1.5        # TEI, vLLM, Infinity
    http://127.0.0.1:11434/v1#nomic-embed-text             # Ollama
    https://api.openai.com/v1#text-embedding-3-small       # key in CRAG_EMBEDDER_API_KEY

Texts are sent in batches (``CRAG_EMBEDDER_BATCH``, 32), up to ``CRAG_EMBEDDER_CONCURRENCY``
(4) requests in flight at once for the whole process, each with a ``CRAG_EMBEDDER_TIMEOUT``
(60 s). Connection errors, timeouts, 408, 429 and 5xx are retried with exponential backoff
(0.5, 1, 2 s; a 429's ``Retry-After`` when it says less than 30 s), 4 attempts in all; then, and at
once for any other answer that cannot be used, an :class:`EmbeddingError` of one line naming
the endpoint and the problem. The vectors come back in input order (by ``index``), float32, L2-normalised
here (many servers do not normalise). An answer with the wrong count, vectors of another size
than the first answer's (or the declared ``dimensions``), or values that are not finite numbers is an
:class:`EmbeddingError`: never a silently broken index.

Identity (``name``): ``served:MODEL``. The base URL is an address, not an identity (a team may
move its server), so two servers of the same model name are the same embedder; the in-process
all-MiniLM-L6-v2 is another one even when a server serves that model (the name a server answers
to is its operator's alias, and its pooling and truncation are its own): its index is rebuilt.

httpx rather than the ``openai`` client: the retry policy (what is retried, how often, the
backoff) is ours in one loop and its errors are worded here, the raw JSON is checked by us
(the client builds its objects without validating them), and the client asks servers for
base64 vectors by default, which not every OpenAI-compatible server sends.
"""

from __future__ import annotations

import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import httpx
import numpy as np

from program.retrieval.embedder_spec import BATCH, CONCURRENCY, TIMEOUT, parse_spec, settings_from_env
from program.retrieval.embedding import EmbeddingError

ATTEMPTS = 4  # tries per request: the first and three retries
BACKOFF = 0.5  # seconds before the first retry, doubled for each next one
MAX_RETRY_AFTER = 30.0  # a 429's Retry-After beyond this is not waited for (the backoff applies)
PROBE_TEXT = "dimension probe"
RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
class ServedEmbedder:
    """Encode texts into L2-normalised float32 vectors by an OpenAI-compatible embeddings server.

    Args:
        base_url: the API's base, e.g. ``http://127.0.0.1:8080/v1`` (requests go to ``/embeddings`` under it).
        model: the model name the server answers to; the embedder's identity (``name``).
        dimensions: the vector size when known; else learned from one probe request when first needed.
        api_key: sent as ``Authorization: Bearer KEY``; None sends none.
        batch_size: texts per request.
        concurrency: requests in flight at most, across every thread using this embedder.
        timeout: seconds per request (connect, and each read).
        attempts: tries per request (retried: connection errors, timeouts, 408, 429, 5xx).
        backoff: seconds before the first retry, doubled each time.
        transport: an ``httpx`` transport (tests).

    Attributes:
        name: ``served:MODEL``, recorded in index manifests.
        endpoint: ``{base_url}/embeddings``, for messages.
    """

    def __init__(self, base_url: str, model: str, *, dimensions: int | None = None, api_key: str | None = None,
                 batch_size: int = BATCH, concurrency: int = CONCURRENCY, timeout: float = TIMEOUT,
                 attempts: int = ATTEMPTS, backoff: float = BACKOFF, transport: httpx.BaseTransport | None = None):
        if batch_size < 1 or concurrency < 1 or attempts < 1 or not timeout > 0:
            raise ValueError("batch_size, concurrency and attempts must be at least 1 and timeout above 0")
        self.base_url, self.model = base_url.rstrip("/"), model
        self.endpoint = self.base_url + "/embeddings"
        self.batch_size, self.concurrency, self.timeout = batch_size, concurrency, timeout
        self.attempts, self.backoff = attempts, backoff
        self._api_key, self._transport = api_key, transport
        self._dimensions = dimensions
        self._lock = threading.Lock()  # creating the client and the worker threads
        self._probe_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)  # the bound on requests in flight
        self._client: httpx.Client | None = None
        self._pool: ThreadPoolExecutor | None = None

    @classmethod
    def from_spec(cls, spec: str, **overrides) -> "ServedEmbedder":
        """The embedder of ``BASE_URL#MODEL`` with the environment's settings (:func:`settings_from_env`)
        unless ``overrides`` give them. Raises ValueError: a bad spec or setting."""
        parsed = parse_spec(spec)
        if parsed is None:
            raise ValueError(f"{spec!r} names the in-process embedder, not a served one")
        return cls(parsed.base_url, parsed.model, **{**settings_from_env(), **overrides})

    @property
    def name(self) -> str:
        return f"served:{self.model}"

    @property
    def dimensions(self) -> int:
        """The vector size: as given, else from one probe request (once).

        Raises:
            EmbeddingError: the probe fails.
        """
        if self._dimensions is None:
            with self._probe_lock:  # not self._lock: the probe's request takes that one for the client
                if self._dimensions is None:
                    self._dimensions = self._embed_batch([PROBE_TEXT], None).shape[1]
        return self._dimensions

    def load(self) -> "ServedEmbedder":
        """Check now that the server answers (the probe of :attr:`dimensions`); returns self.

        Raises:
            EmbeddingError: it does not, or answers something unusable.
        """
        self.dimensions  # the probe
        return self

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts``: batches of ``batch_size`` sent concurrently, up to ``concurrency``.

        Returns:
            ``np.ndarray`` of shape ``(len(texts), dimensions)``, dtype float32, rows of L2 norm 1,
            row i for ``texts[i]``. An empty list gives shape ``(0, dimensions)``.

        Raises:
            TypeError: ``texts`` is a bare string (pass a list).
            EmbeddingError: a batch failed after its retries, or was answered with the wrong
                count, size or values (one line naming the endpoint); the other batches are dropped.
        """
        if isinstance(texts, str):
            raise TypeError("encode() takes a list of strings, not a str")
        texts = list(texts)
        dims = self.dimensions
        if not texts:
            return np.zeros((0, dims), dtype=np.float32)
        batches = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        if len(batches) == 1:  # a query: in the caller's thread, no hand-over
            return self._embed_batch(batches[0], dims)
        futures = [self._executor().submit(self._embed_batch, batch, dims) for batch in batches]
        try:
            return np.concatenate([f.result() for f in futures])
        except BaseException:
            for f in futures:  # the batches not yet sent are not sent
                f.cancel()
            raise

    def close(self) -> None:
        """Close the connections and the worker threads (a later ``encode`` opens them again)."""
        with self._lock:
            client, pool, self._client, self._pool = self._client, self._pool, None, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        if client is not None:
            client.close()

    def __repr__(self) -> str:
        return f"ServedEmbedder(name={self.name!r}, endpoint={_shown(self.endpoint)!r})"

    # ------------------------------------------------------------------ requests
    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="embed")
            return self._pool

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._client is None:
                headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
                self._client = httpx.Client(timeout=self.timeout, headers=headers, limits=limits,
                                            transport=self._transport)
            return self._client

    def _fail(self, problem: str) -> EmbeddingError:
        return EmbeddingError(f"embedding server {_shown(self.endpoint)} (model {self.model!r}): {problem}")

    def _embed_batch(self, texts: list[str], dims: int | None) -> np.ndarray:
        """One request's vectors, checked and normalised: shape ``(len(texts), dims)`` (``dims``
        None: any size, the same for every row). Raises ``EmbeddingError``."""
        return self._vectors(self._post(texts), len(texts), dims)

    def _post(self, texts: list[str]) -> dict:
        """The JSON answer to one request, retried as the module docstring says. Raises ``EmbeddingError``."""
        body = {"model": self.model, "input": texts, "encoding_format": "float"}
        problem = ""
        for attempt in range(self.attempts):
            wait = self.backoff * 2 ** attempt
            try:
                with self._slots:
                    response = self._http().post(self.endpoint, json=body)
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout:g} s"
            except httpx.ConnectError as exc:
                problem = f"cannot connect: {_first_line(str(exc)) or type(exc).__name__}"
            except httpx.RequestError as exc:  # the connection dropped mid-answer, a broken response
                problem = f"request failed: {_first_line(str(exc)) or type(exc).__name__}"
            else:
                if response.status_code == 200:
                    try:
                        return response.json()
                    except ValueError:
                        raise self._fail("answered HTTP 200 with a body that is not JSON") from None
                problem = f"HTTP {response.status_code}: {_server_message(response)}"
                if response.status_code not in RETRIED_STATUS:
                    raise self._fail(problem)
                wait = _retry_after(response) or wait
            if attempt + 1 < self.attempts:
                time.sleep(wait * random.uniform(0.8, 1.2))  # jitter: concurrent batches do not retry in step
        raise self._fail(f"{problem} ({self.attempts} attempts)")

    def _vectors(self, payload, n: int, dims: int | None) -> np.ndarray:
        """``payload``'s ``data`` as an ``(n, dims)`` float32 array in input order, L2-normalised.
        An item without ``index`` is taken in its place in the list. Raises ``EmbeddingError``."""
        data = payload.get("data") if isinstance(payload, dict) else None
        if not isinstance(data, list):
            raise self._fail("answered without a 'data' list of embeddings")
        if len(data) != n:
            raise self._fail(f"answered {len(data)} embeddings for {n} texts")
        rows: dict[int, list] = {}
        for position, item in enumerate(data):
            index = item.get("index", position) if isinstance(item, dict) else None
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n or index in rows:
                raise self._fail(f"answered a bad or repeated index {index!r} for {n} texts")
            rows[index] = item.get("embedding")
        sizes = {len(v) if isinstance(v, list) else None for v in rows.values()}
        if None in sizes:
            raise self._fail("answered an embedding that is not a list of numbers")
        expected = dims if dims is not None else next(iter(sizes))
        if sizes != {expected}:
            raise self._fail(f"answered {'/'.join(str(s) for s in sorted(sizes))}-dimensional vectors, "
                             f"expected {expected}")
        try:  # numpy types the values in C (strings, None, booleans show in the dtype): no Python loop per float
            vectors = np.array([rows[i] for i in range(n)])
        except (TypeError, ValueError):
            vectors = None
        if vectors is None or vectors.ndim != 2 or vectors.dtype.kind not in "fiu":
            raise self._fail("answered an embedding that is not a list of numbers")
        vectors = vectors.astype(np.float64)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        if not np.all(np.isfinite(norms)) or np.any(norms == 0):
            raise self._fail("answered a vector that is zero or not finite")
        return np.ascontiguousarray(vectors / norms, dtype=np.float32)


def _shown(url: str) -> str:
    """``url`` without user or password: messages never carry a credential."""
    parts = urlsplit(url)
    if parts.username or parts.password:
        parts = parts._replace(netloc=parts.hostname + (f":{parts.port}" if parts.port else ""))
    return urlunsplit(parts)


def _first_line(text: str, limit: int = 200) -> str:
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _server_message(response: httpx.Response) -> str:
    """The error a server gave: OpenAI's ``error.message``, TEI's ``error``, FastAPI's ``detail``,
    else the body's first line; one line of at most 200 characters."""
    try:
        body = response.json()
    except ValueError:
        return _first_line(response.text) or response.reason_phrase
    if isinstance(body, dict):
        error = body.get("error") or body.get("detail") or body.get("message")
        if isinstance(error, dict):
            error = error.get("message")
        if error:
            return _first_line(error if isinstance(error, str) else json.dumps(error))
    return _first_line(json.dumps(body))


def _retry_after(response: httpx.Response) -> float | None:
    """A 429's or 503's ``Retry-After`` in seconds when it is a number up to ``MAX_RETRY_AFTER``."""
    try:
        seconds = float(response.headers.get("Retry-After", ""))
    except ValueError:
        return None
    return seconds if 0 <= seconds <= MAX_RETRY_AFTER else None
