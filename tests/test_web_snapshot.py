"""The offline snapshot web backend over a small JSONL of pages (real MiniLM embedder)."""

from __future__ import annotations

import json

import pytest

from program.web import OfflineSnapshotBackend, SearchBackend, SearchHit, WebSearchError, default_cache_dir
from program.web.snapshot import PROJECT_ROOT


class CountingEmbedder:
    def __init__(self, inner):
        self.inner, self.name, self.dimensions, self.texts = inner, inner.name, inner.dimensions, 0

    def encode(self, texts):
        self.texts += len(texts)
        return self.inner.encode(texts)


def filler(topic: str, n: int) -> str:
    return " ".join(f"This sentence is about {topic} detail number {i}." for i in range(n))


PAGES = [
    {"url": "https://en.wikipedia.org/wiki/Kharbin", "title": "Harbin",
     "paragraphs": ["Harbin is a city in Heilongjiang province in northeastern China.",
                    filler("Harbin winters and the ice festival", 30),
                    "The Harbin Ice and Snow Sculpture Festival is held every January."]},
    {"url": "https://en.wikipedia.org/wiki/Jacques_Brel", "title": "Jacques Brel",
     "paragraphs": ["Jacques Brel was a Belgian singer-songwriter and actor.",
                    "He composed the song Ne me quitte pas in 1959."]},
    {"url": "https://en.wikipedia.org/wiki/Ada_Lovelace", "title": "Ada Lovelace",
     "paragraphs": ["Ada Lovelace was an English mathematician who wrote the first computer program "
                    "for Charles Babbage's Analytical Engine."]},
    {"url": "https://en.wikipedia.org/wiki/Mount_Kenya", "title": "Mount Kenya",
     "paragraphs": ["Mount Kenya is the highest mountain in Kenya.", filler("glaciers on Mount Kenya", 30)]},
]


@pytest.fixture
def snapshot(tmp_path):
    path = tmp_path / "web_snapshot.jsonl"
    path.write_text("\n".join(json.dumps(p) for p in PAGES) + "\n")
    return path


def test_search_returns_pages_with_full_content(snapshot, tmp_path, embedder):
    backend = OfflineSnapshotBackend(snapshot, index_dir=tmp_path / "idx", embedder=embedder)
    assert isinstance(backend, SearchBackend) and backend.name == "offline-snapshot"
    hits = backend.search("In what country is Harbin?", k=3)
    assert len(hits) == 3 and all(isinstance(h, SearchHit) for h in hits)
    assert len({h.url for h in hits}) == 3  # one hit per page even though Harbin has several chunks
    top = hits[0]
    assert (top.url, top.title) == ("https://en.wikipedia.org/wiki/Kharbin", "Harbin")
    assert top.content == "\n\n".join(PAGES[0]["paragraphs"])
    assert top.snippet.startswith("Harbin is a city in Heilongjiang") and len(top.snippet) < len(top.content)
    assert backend.search("Who wrote Ne me quitte pas?", k=1)[0].title == "Jacques Brel"
    assert backend.search("first computer program", k=1)[0].url.endswith("Ada_Lovelace")
    assert len(backend.search("mountain", k=10)) == 4  # only 4 pages exist
    assert backend.search("  ", k=3) == [] and backend.search("Harbin", k=0) == []
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["documents"] == 4 and manifest["chunk_count"] > 4


def test_index_is_cached_and_reused(snapshot, tmp_path, embedder):
    first = CountingEmbedder(embedder)
    OfflineSnapshotBackend(snapshot, tmp_path / "idx", embedder=first).search("Harbin", 1)
    assert first.texts > 5
    second = CountingEmbedder(embedder)
    hits = OfflineSnapshotBackend(snapshot, tmp_path / "idx", embedder=second).search("Harbin", 1)
    assert second.texts == 1 and hits[0].title == "Harbin"  # only the query was embedded


def test_default_index_dir_honours_env(snapshot, tmp_path, monkeypatch):
    monkeypatch.delenv("CRAG_CACHE_DIR", raising=False)
    assert default_cache_dir() == PROJECT_ROOT / ".cache"
    assert (PROJECT_ROOT / "program" / "web" / "snapshot.py").is_file()
    monkeypatch.setenv("CRAG_CACHE_DIR", str(tmp_path / "cache"))
    assert OfflineSnapshotBackend(snapshot).index_dir == tmp_path / "cache" / "indexes" / "web_snapshot"


def test_missing_or_broken_snapshot(tmp_path, embedder):
    with pytest.raises(WebSearchError, match=r"offline-snapshot: snapshot file not found: .*nope\.jsonl") as err:
        OfflineSnapshotBackend(tmp_path / "nope.jsonl")
    assert err.value.backend == "offline-snapshot"
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"url": "u", "paragraphs": ["ok"]}\n{oops\n')
    backend = OfflineSnapshotBackend(broken, tmp_path / "idx", embedder=embedder)
    with pytest.raises(WebSearchError, match=r"cannot index snapshot .*broken\.jsonl:2"):
        backend.search("anything")
