"""Shared fixtures: a fake LM with CRAG rules, a list-backed knowledge base, a fake web backend."""

from __future__ import annotations

import os
import re

import dspy
import numpy as np
import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from program.retrieval.embedding import Embedder
from program.types import Passage
from signatures import (
    AnswerClosedBook,
    CheckClaimSupport,
    DecideRetrieval,
    ExtractClaims,
    GenerateAnswer,
    GenerateStrictAnswer,
    GradeDocumentBinary,
    GradeRetrieval,
    JudgeUsefulness,
    RewriteForWebSearch,
    RewriteQuery,
    StandaloneQuestion,
    StripRelevance,
)
from tests.fake_lm import FakeLM, parse_list

FOUNDING = "Acme Rockets was founded by Jane Roe in 1999."

_encode = Embedder.encode
_vectors: dict[tuple[str, str], np.ndarray] = {}


def _encode_each_text_once(self, texts):
    """``Embedder.encode`` with each distinct text embedded once per test process: the suite
    indexes and adapts to the same handbook documents in many tests, and MiniLM on one core was
    most of its time. Every vector still comes from the real model."""
    if isinstance(texts, str) or not texts:
        return _encode(self, texts)
    texts, model = list(texts), str(self.model_path)
    missing = [t for t in dict.fromkeys(texts) if (model, t) not in _vectors]
    if missing:
        _vectors.update(((model, t), v) for t, v in zip(missing, _encode(self, missing)))
    return np.stack([_vectors[(model, t)] for t in texts])


Embedder.encode = _encode_each_text_once


class ListKnowledgeBase:
    """Returns its passages in order, as if they were the top-k for any query."""

    def __init__(self, texts: list[str]):
        self.passages = [Passage(id=f"doc{i}#0", text=t, score=0.5) for i, t in enumerate(texts)]
        self.queries: list[str] = []

    def search(self, query: str, k: int = 3) -> list[Passage]:
        self.queries.append(query)
        return self.passages[:k]


class FakeWeb:
    """A search backend that returns fixed pages and records its queries."""

    name = "fake-web"

    def __init__(self, pages: list[tuple[str, str]], error: Exception | None = None):
        self.pages, self.error, self.queries = pages, error, []

    def search(self, query: str, k: int = 3):
        from program.web.base import SearchHit

        self.queries.append(query)
        if self.error:
            raise self.error
        return [SearchHit(url=u, title=u, snippet=t[:80], content=t) for u, t in self.pages[:k]]


def grade(inputs):
    passage = inputs["passage"]
    return {"same_entity": "Acme" in passage, "answers_question": "founded by" in passage, "outdated": False}


def grade_strip(inputs):
    """Copy "Jane Roe" out of a strip that names her, else NONE."""
    return {"answer_span": "Jane Roe" if "Jane Roe" in inputs["strip"] else "NONE"}


def generate(inputs):
    for i, strip in enumerate(parse_list(inputs["context"]), 1):
        if "founded by Jane Roe" in strip:
            return {"answer": f"Acme Rockets was founded by Jane Roe [{i}]."}
    return {"answer": "I don't know."}


def support(inputs):
    """Quote the evidence sentence sharing the claim's last two words, else NONE."""
    tail = " ".join(inputs["claim"].rstrip(".").split()[-2:])
    quotes = [s for s in re.split(r"(?<=\.)\s+", inputs["evidence"]) if tail in s]
    return {"quote": quotes[0] if quotes else "NONE"}


def extract(inputs):
    return {"claims": [s for s in re.split(r"(?<=\.)\s+", inputs["answer"]) if s]}


def standalone(inputs):
    """A follow-up's "it" replaced by the first capitalised name of two words in the conversation."""
    names = re.findall(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)+", inputs["conversation"])
    question = re.sub(r"\bit\b", names[0], inputs["followup"]) if names else inputs["followup"]
    return {"standalone_question": question}


def decide(inputs):
    """Greetings and thanks need no retrieval; everything else does."""
    return {"needs_retrieval": re.match(r"(hi|hello|thanks|thank you)\b", inputs["question"], re.I) is None}


def grade_binary(inputs):
    """LangGraph's binary grader: a document naming Acme is relevant ("yes"), any other is not."""
    return {"relevant": "yes" if "Acme" in inputs["document"] else "no"}


def rewrite_for_web(inputs):
    """LangGraph's question re-writer: a better question for web search."""
    return {"query": "Who founded the company Acme Rockets?"}


def default_rules() -> dict:
    return {
        GradeRetrieval: grade,
        StripRelevance: grade_strip,
        RewriteQuery: lambda i: {"query": "Acme Rockets founder"},
        GenerateAnswer: generate,
        GenerateStrictAnswer: generate,
        ExtractClaims: extract,
        CheckClaimSupport: support,
        AnswerClosedBook: lambda i: {"answer": "Acme Rockets was founded by Jane Roe."},
        DecideRetrieval: decide,
        GradeDocumentBinary: grade_binary,
        RewriteForWebSearch: rewrite_for_web,
        JudgeUsefulness: lambda i: {"useful": "don't know" not in i["answer"].lower()},
        StandaloneQuestion: standalone,
    }


@pytest.fixture(scope="session")
def embedder():
    """The packaged all-MiniLM-L6-v2 embedder (the program's shared one), warmed up once."""
    from program.retrieval import get_embedder

    emb = get_embedder()
    emb.encode(["warm up"])
    return emb


@pytest.fixture
def fake_lm():
    """Configure DSPy with a FakeLM on the default CRAG rules; tests may edit ``lm.rules``."""
    lm = FakeLM(default_rules())
    with dspy.context(lm=lm):
        yield lm


@pytest.fixture
def web_server():
    """A loopback HTTP server playing every search provider and serving test pages (tests/web_server.py)."""
    from tests.web_server import start

    server = start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def web_config(web_server, tmp_path):
    """A WebConfig pointing every backend at the loopback server: its address allowed, fast timeouts, no cache."""
    from program.web.config import WebConfig
    from tests.web_server import KEY

    base = web_server.base
    return WebConfig(backend="searxng", searx_url=f"{base}/searxng", duckduckgo_url=f"{base}/ddg/html/",
                     wikipedia_url=f"{base}/wiki/w/api.php", tavily_url=f"{base}/tavily/search",
                     serper_url=f"{base}/serper/search", brave_url=f"{base}/brave/res/v1/web/search",
                     tavily_api_key=KEY, serper_api_key=KEY, brave_api_key=KEY,
                     connect_timeout=0.5, read_timeout=0.5, retries=1, backoff=0.01,
                     private_networks=("127.0.0.1/32",), cache_ttl=0, cache_dir=str(tmp_path / "pages"))


@pytest.fixture(scope="session")
def served_fake_lm():
    """The fake LM behind an OpenAI-compatible loopback server (tests/served_fake_lm.py)."""
    from tests.served_fake_lm import start

    server = start(delay=0.01)
    yield server
    server.stop()


def first_strip(inputs):
    """A reader that answers with its first strip's first sentence, cited ``[1]``."""
    strips = parse_list(inputs["context"])
    return {"answer": strips[0].split(". ")[0].rstrip(".") + " [1]."} if strips else {"answer": "I don't know."}


@pytest.fixture(scope="session")
def citing_lm():
    """A served fake LM whose reader answers any question from its first strip (``first_strip``): an
    answer cites whatever the search found, so a citation from a document it should not read shows."""
    from tests.served_fake_lm import start

    server = start({**default_rules(), GenerateAnswer: first_strip, GenerateStrictAnswer: first_strip})
    yield server
    server.stop()


@pytest.fixture(scope="session")
def service(served_fake_lm, tmp_path_factory):
    """``python -m program serve`` as a real process: the served fake LM, a two-document knowledge
    base, the uncompiled signatures, no web, every LM call made (``--no-cache``: a cached call has no
    token counts, so an answer depended on which test asked first), a step trace file; ``service.trace`` is its
    path; its
    start's output (progress bars forced on) is in ``service.log``."""
    from tests.service_process import ServiceProcess, program_env, write_docs

    root = tmp_path_factory.mktemp("service")
    docs = write_docs(root / "docs")
    trace = root / "trace.jsonl"
    process = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                              "--compiled", "none", "--web", "none", "--trace-jsonl", str(trace), "--no-cache"],
                             program_env(root / "cache", CRAG_PROGRESS="1"), root / "serve.log")
    process.trace, process.docs, process.root = trace, docs, root
    yield process
    process.stop()


@pytest.fixture(scope="session")
def tight_service(served_fake_lm, tmp_path_factory):
    """A second ``serve`` process whose operator set tight limits: the offline web snapshot as its
    only backend, ``-k 2``, retrieve-or-not on, one question at a time and none waiting
    (``--max-queue 0``), 3 s per question, 1 s to send a request body."""
    from tests.service_process import ServiceProcess, program_env, write_docs

    root = tmp_path_factory.mktemp("tight-service")
    docs = write_docs(root / "docs")
    process = ServiceProcess(["--model", "openai/fake", "--api-base", served_fake_lm.base, "--kb", str(docs),
                              "--compiled", "none", "--web", "snapshot", "-k", "2", "--decide-retrieval",
                              "--concurrency", "1",
                              "--max-queue", "0", "--timeout", "3", "--read-timeout", "1", "--no-cache"],
                             program_env(root / "cache"), root / "serve.log")
    process.docs, process.root = docs, root
    yield process
    process.stop()


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory):
    """A real PostgreSQL 16 + pgvector server on a temporary data directory, for the whole session."""
    from tests.postgres import start

    server = start(tmp_path_factory.mktemp("pgdata"))
    yield server
    server.cleanup()


@pytest.fixture
def pg_url(pg_server):
    """A knowledge-base URL on the session's server with a table of its own."""
    from tests.postgres import kb_url

    return kb_url(pg_server)
