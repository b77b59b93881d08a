"""The knowledge base's vocabulary (program/retrieval/vocabulary.py): collected at index time,
saved beside the index, reloaded, built from the stored chunks for an older index, and the
candidate terms nearest to a question (real MiniLM embedder)."""

from __future__ import annotations

import json

import numpy as np

from program.retrieval import Chunk, KnowledgeBase
from program.retrieval.index import embed_text
from program.retrieval.vocabulary import DEFAULT_PARAMS, extract_terms

DOCS = {
    "payouts.md": "# Payouts\n\n## Payout schedule\n\nPaylane sends your available balance to your bank "
                  "account on your payout schedule: every business day, two days after the payment.\n\n"
                  "## Instant payouts\n\nAn instant payout reaches an eligible debit card within 30 minutes "
                  "for a fee of 1.5%.\n\n## When will I receive my money?\n\nSee the payout schedule.\n",
    "disputes.md": "# Disputes\n\n## Chargebacks\n\nA chargeback happens when a cardholder asks their bank to "
                   "reverse a card payment. Paylane debits the disputed amount and a dispute fee.\n",
    "api-keys.md": "# API keys\n\n## Rolling a secret key\n\nRoll your secret key from the Dashboard when it "
                   "may have leaked; the old key stops working after 12 hours.\n",
}
QUESTION = "When does the money from my sales land in my bank account?"


class TextSpy:
    """Wraps the real embedder and records every text it is asked to embed."""

    def __init__(self, inner):
        self.inner, self.name, self.dimensions = inner, inner.name, inner.dimensions
        self.texts: list[list[str]] = []

    def encode(self, texts):
        self.texts.append(list(texts))
        return self.inner.encode(texts)


def write_docs(root, docs=DOCS):
    root.mkdir(parents=True, exist_ok=True)
    for name, text in docs.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def saved(idx):
    return json.loads((idx / "vocabulary.json").read_text(encoding="utf-8")), np.load(idx / "vocabulary.npy")


def test_vocabulary_is_built_and_saved_with_the_index_and_reloaded(tmp_path, embedder):
    corpus, idx = write_docs(tmp_path / "c"), tmp_path / "idx"
    spy = TextSpy(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy)
    record, vectors = saved(idx)
    assert [len(t) for t in spy.texts] == [len(kb), len(kb.vocabulary)]  # chunks, then terms
    assert spy.texts[1] == record["terms"] == kb.vocabulary.terms
    terms = set(record["terms"])
    assert {"Payouts", "Payout schedule", "Instant payouts", "Chargebacks", "Rolling a secret key"} <= terms
    assert "When will I receive my money?" not in terms  # an FAQ heading is the user's wording, not a term
    assert {"cardholder", "dashboard", "secret"} <= terms  # key phrases of the texts
    assert record["kinds"][:2] == ["title", "heading"] and "phrase" in record["kinds"]
    assert vectors.shape == (len(terms), 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    m = json.loads((idx / "manifest.json").read_text())
    assert record["stamp"] == {"model": m["embedding"]["model"], "dimensions": 384, "chunk_count": len(kb),
                               "created": m["created"]}
    assert record["params"] == DEFAULT_PARAMS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "idx"]  # no temp folders left
    assert not [p for p in idx.iterdir() if ".tmp" in p.name]

    spy = TextSpy(embedder)
    again = KnowledgeBase.build(corpus, idx, embedder=spy)  # unchanged corpus: everything reused
    assert again.vocabulary.terms == kb.vocabulary.terms and spy.texts == []
    loaded = KnowledgeBase.load(idx, embedder=spy)
    assert np.array_equal(loaded.vocabulary.vectors, vectors) and spy.texts == []


def test_candidate_terms_nearest_first(tmp_path, embedder):
    kb = KnowledgeBase.build(write_docs(tmp_path / "c"), tmp_path / "idx", embedder=embedder)
    top = kb.candidate_terms(QUESTION, n=3)
    assert "Payout schedule" in top and len(top) == 3
    assert "Chargebacks" in kb.candidate_terms("A customer got their money back through their bank", n=3)
    assert len(kb.candidate_terms(QUESTION)) == min(12, len(kb.vocabulary))
    assert kb.candidate_terms(QUESTION, n=1000) and len(kb.candidate_terms(QUESTION, n=1000)) == len(kb.vocabulary)
    assert kb.candidate_terms("   ") == [] and kb.candidate_terms(QUESTION, n=0) == []
    # nearest first: the cosine similarities of the returned terms do not increase
    vocab, q = kb.vocabulary, embedder.encode([QUESTION])[0]
    sims = [float(vocab.vectors[vocab.terms.index(t)] @ q) for t in kb.candidate_terms(QUESTION, n=8)]
    assert sims == sorted(sims, reverse=True)


def test_an_index_saved_without_vocabulary_builds_it_from_its_stored_chunks(tmp_path, embedder):
    corpus, idx = write_docs(tmp_path / "c"), tmp_path / "idx"
    kb = KnowledgeBase.build(corpus, idx, embedder=embedder)
    expected = kb.vocabulary.terms
    for name in ("vocabulary.json", "vocabulary.npy"):  # as saved before the vocabulary existed
        (idx / name).unlink()
    spy = TextSpy(embedder)
    old = KnowledgeBase.load(idx, embedder=spy)
    assert spy.texts == []  # loading stays free
    assert "Payout schedule" in old.candidate_terms(QUESTION, n=3)
    assert spy.texts[0] == expected and spy.texts[1] == [QUESTION]  # the terms and the question only
    chunk_texts = {embed_text(c) for c in old.chunks} | {c.text for c in old.chunks}
    assert not chunk_texts & {t for batch in spy.texts for t in batch}  # no chunk embedded again
    record, _ = saved(idx)
    assert record["terms"] == expected and record["stamp"]["created"] == old.manifest["created"]

    spy = TextSpy(embedder)
    assert KnowledgeBase.load(idx, embedder=spy).vocabulary.terms == expected and spy.texts == []


def test_vocabulary_of_another_build_is_not_used(tmp_path, embedder):
    corpus, idx = write_docs(tmp_path / "c"), tmp_path / "idx"
    KnowledgeBase.build(corpus, idx, embedder=embedder)
    record, _ = saved(idx)
    record["stamp"]["created"] = "1999-01-01T00:00:00+00:00"
    (idx / "vocabulary.json").write_text(json.dumps(record))
    spy = TextSpy(embedder)
    assert "Payout schedule" in KnowledgeBase.load(idx, embedder=spy).vocabulary.terms
    assert len(spy.texts) == 1  # rebuilt from the stored chunks

    # a rebuilt index (the corpus changed) gets a new vocabulary with it
    (corpus / "refunds.md").write_text("# Refunds\n\n## Refund window\n\nRefund a payment within 180 days.\n")
    kb = KnowledgeBase.build(corpus, idx, embedder=embedder)
    record, vectors = saved(idx)
    assert "Refund window" in record["terms"] and record["stamp"]["created"] == kb.manifest["created"]
    assert vectors.shape[0] == len(record["terms"]) == len(kb.vocabulary)


def test_build_without_vocabulary_builds_it_only_when_needed(tmp_path, embedder):
    corpus, idx = write_docs(tmp_path / "c"), tmp_path / "idx"
    spy = TextSpy(embedder)
    kb = KnowledgeBase.build(corpus, idx, embedder=spy, with_vocabulary=False)
    assert len(spy.texts) == 1 and not (idx / "vocabulary.json").exists()
    assert "Payout schedule" in kb.candidate_terms(QUESTION, n=3) and (idx / "vocabulary.json").is_file()


def chunk(text, doc="d", title="", heading=""):
    return Chunk(f"{doc}#0", doc, text, title=title, heading=heading)


def test_extract_terms_headings_titles_and_phrases():
    chunks = [chunk("The **payout schedule** sets when payouts arrive. A payout schedule can be daily.",
                    "a", "Payouts", "Payout schedule"),
              chunk("Rows of a JSONL file: a title comes from its title field. Chargebacks cost a fee; "
                    "the payout schedule is unchanged.", "b", "Rome"),
              chunk("Webhook events. Webhook event.", "c", "Webhooks", "Webhook events")]
    terms, kinds, sources = extract_terms(chunks, {"phrases_per_chunk": 50})  # every phrase of a chunk
    assert terms[:5] == ["Payouts", "Payout schedule", "Rome", "Webhooks", "Webhook events"]  # titles, headings first
    assert kinds[:5] == ["title", "heading", "title", "title", "heading"] and set(kinds[5:]) == {"phrase"}
    assert "Webhook events" in terms and "webhook event" not in terms  # case and plural duplicates
    assert sources[terms.index("Payout schedule")] == [0, 1]  # a heading, and a key phrase of chunk 1
    for phrase in (t for t, k in zip(terms, kinds) if k == "phrase"):
        # phrases never cross a stop word or punctuation: each is a run of words of some text
        assert any(phrase in " ".join(c.text.casefold().replace("*", "").split()) for c in chunks), phrase
    assert "payouts arrive" not in terms  # a two-word run seen once is no term (min_phrase_count 2)


def test_extract_terms_drops_corpus_wide_words_and_question_headings():
    chunks = [chunk(f"Acme handles topic{i} for you. Acme topic{i} rules.", f"d{i}", f"Doc {i}") for i in range(12)]
    chunks.append(chunk("Why? Acme", "faq", "FAQ", "How do I reach Acme?"))
    terms, _, _ = extract_terms(chunks, {"phrases_per_chunk": 5})
    assert "How do I reach Acme?" not in terms
    assert not [t for t in terms if "acme" in t.split()]  # in every document: no information
    assert "topic3" in terms
    small, _, _ = extract_terms(chunks[:3], {"phrases_per_chunk": 5})  # too few documents to tell
    assert "acme" in small
    assert extract_terms([]) == ([], [], [])
