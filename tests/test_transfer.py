"""The leave-one-domain-out transfer run: judges fitted on chosen sources, measured on a domain."""

from __future__ import annotations

import json

import pytest

from eval_sets.domains import DOMAINS, load_rows
from experiments import transfer
from optimize.training.sources import domain_source
from program.adaptation.fit import fit_judges

pytestmark = pytest.mark.slow  # starts a server, a subprocess or a fit: left out of the inner loop


@pytest.fixture(scope="module")
def help_centre(embedder):
    from program.app import resources

    kb = resources.knowledge_base(DOMAINS["adversarial"].kb_dir)
    return kb, domain_source("adversarial", kb, embedder)


def test_a_domain_source_holds_its_training_rows_only(help_centre):
    _, source = help_centre
    train = {r["id"] for k in ("grading", "queries", "strips", "support") for r in load_rows("adversarial", k, "train")}
    groups = set(source.passage.groups) | set(source.strip.groups) | set(source.support.groups)
    assert groups <= train
    assert set(source.expected) == {r["id"] for r in load_rows("adversarial", "queries", "train")
                                    if r["needs_retrieval"]}


def test_judges_fitted_with_the_labels_calibrate_that_knowledge_base(help_centre, embedder):
    kb, source = help_centre
    judges = fit_judges([source], embedder, log=lambda m: None)
    own = judges.thresholds_for(kb)
    assert 0.05 <= own["lower"] <= own["upper"] <= 0.95
    assert 0.05 <= judges.thresholds["support_partially"] <= judges.thresholds["support_fully"] <= 0.95
    figures = transfer.measure_domain(judges, "adversarial", kb, embedder)
    asked = [r for r in load_rows("adversarial", "queries", "test") if r["needs_retrieval"]]
    assert figures["rows"]["queries"] == len(asked)
    assert figures["rows"]["passages"] == 5 * len(asked)
    assert figures["splits"] == {"queries": "test", "strips": "test", "support": "test"}
    assert sum(sum(row.values()) for row in figures["confusion"].values()) == len(asked)
    for name in transfer.FIGURES:
        assert 0.0 <= figures[name] <= 1.0, name


def test_fit_judges_needs_a_source():
    with pytest.raises(ValueError, match="at least one source"):
        fit_judges([])


def test_the_summary_is_written_whole_and_tabled(tmp_path):
    summary = {"kubernetes": {f: {"labels_out": 0.5, "labels_in": 0.75} for f in transfer.FIGURES}}
    summary["kubernetes"]["rows"] = {"queries": 120}
    path = transfer.write_summary(summary, tmp_path, {"command": "python -m experiments.transfer"})
    saved = json.loads(path.read_text())
    assert saved["kubernetes"]["strip_f1"] == {"labels_out": 0.5, "labels_in": 0.75}
    assert list(tmp_path.iterdir()) == [path]
    assert "| kubernetes | 0.500 / - / 0.750 | 0.500 / - / 0.750 | 0.500 / - / 0.750 | 0.500 / - / 0.750 | 120 |" \
        in transfer.format_table(summary)


def test_an_unknown_domain_exits_2(capsys):
    assert transfer.main(["--domains", "kubernetes,nosuch"]) == 2
    assert "unknown domain(s) ['nosuch']" in capsys.readouterr().err


def test_a_knowledge_base_gives_training_rows_of_itself(help_centre, embedder):
    from program.adaptation.synthetic_rows import document_source, heading_questions

    kb, _ = help_centre
    asked = heading_questions(kb, max_questions=40)
    assert len(asked) == 40 and all(len(q.split()) >= 2 for q, _ in asked)
    source = document_source("help centre (documents)", kb, embedder, max_questions=40, log=lambda m: None)
    correct = [g for g, a in source.expected.items() if a == "correct"]
    assert correct and all(a == "incorrect" for g, a in source.expected.items() if g.endswith("-out"))
    # each kept question's source chunk is its one relevant passage; its "not covered" twin has none
    for g in correct:
        assert sum(label for label, group in zip(source.passage.labels, source.passage.groups) if group == g) == 1
    assert not any(label for label, group in zip(source.passage.labels, source.passage.groups)
                   if group.endswith("-out"))
    assert 0 < sum(source.strip.labels) < len(source.strip) and len(source.support) > 0
    assert source.support_weight == 1.0
    # every row group is traced to its corpus file, the "not covered" twin to its question's
    assert set(source.files) >= set(source.passage.groups) | set(source.support.groups)
    assert all(source.files[f"{g}-out"] == source.files[g] for g in correct if f"{g}-out" in source.expected)
    judges = fit_judges([source], embedder, log=lambda m: None)
    assert judges.thresholds_for(kb)["lower"] <= judges.thresholds_for(kb)["upper"]


def _first_sentence(inputs):
    """The fake LM asks the passage's first sentence back and copies its first three words."""
    first = inputs["passage"].split(". ")[0]
    return {"question": first, "answer": " ".join(first.split()[:3])}


def test_written_questions_are_kept_the_ares_way_and_cached(help_centre, fake_lm, tmp_path):
    from program.adaptation.lm_questions import write_questions
    from signatures import WriteQuestion

    kb, _ = help_centre
    fake_lm.rules[WriteQuestion] = _first_sentence
    rows = write_questions(kb, n=4, cache_dir=tmp_path, log=lambda m: None)
    assert len(rows) == 4 and fake_lm.calls["WriteQuestion"] == 4
    assert len({kb.chunks[[c.chunk_id for c in kb.chunks].index(r["chunk_id"])].doc_id for r in rows}) == 4
    for r in rows:  # kept means: the answer is in the chunk and the chunk is ranked first for the question
        assert r["kept"] == (kb.search(r["question"], 1)[0].id == r["chunk_id"])
    assert write_questions(kb, n=4, cache_dir=tmp_path, log=lambda m: None) == rows
    assert fake_lm.calls["WriteQuestion"] == 4  # unchanged documents: nothing asked again


def test_question_writing_stops_at_its_time_cap(help_centre, fake_lm, tmp_path):
    from program.adaptation.lm_questions import write_questions
    from signatures import WriteQuestion

    kb, _ = help_centre
    fake_lm.rules[WriteQuestion] = _first_sentence
    said = []
    assert write_questions(kb, n=4, time_cap=-1, cache_dir=tmp_path, log=said.append) == []
    assert fake_lm.calls["WriteQuestion"] == 0 and said[0] == "question writing stopped at its time cap (-1 s)"


def test_the_cross_encoder_learns_a_pair_and_names_a_bad_call():
    from experiments.cross_encoder import CrossEncoderJudge

    judge = CrossEncoderJudge(max_length=64)
    relevant = ("How long do refunds take?", "Refunds appear within 5-10 business days.")
    other = ("How long do refunds take?", "Payouts are sent every weekday.")
    before = judge.predict([relevant, other])
    judge.fit([relevant, other] * 8, [1, 0] * 8, epochs=3, batch_size=4, lr=1e-4, warmup=4)
    assert judge.steps == 12  # 3 epochs of 4 batches
    after = judge.predict([relevant, other])
    assert after.shape == (2,) and ((after >= 0) & (after <= 1)).all()
    assert after[0] - after[1] > before[0] - before[1]
    with pytest.raises(ValueError, match="as many labels as pairs"):
        judge.fit([relevant], [1, 0])


def test_cross_encoder_rows_keep_the_domains_and_sample_popqa():
    from experiments.train_cross_encoder import training_pairs
    from program.adaptation.fit import SourcePairs
    from program.adaptation.pairs import Pairs

    def source(name, n):
        pairs = Pairs()
        for i in range(n):
            pairs.add([0.0], [], i % 2, f"{name}-{i}", text=(f"{name} q{i}", "p"))
        return SourcePairs(name, None, pairs, Pairs(), Pairs(cues=None))

    pairs, labels = training_pairs([source("popqa", 50), source("kubernetes", 8)], max_pairs=20)
    assert len(pairs) == 20 and sum(q.startswith("kubernetes") for q, _ in pairs) == 8
    assert pairs[:8] == [(f"kubernetes q{i}", "p") for i in range(8)] and labels[:2] == [0, 1]


def test_a_paraphrased_answer_finds_the_strip_that_holds_it():
    from program.adaptation.lm_questions import answer_sentence

    chunk = ("A Pod is evicted when the node runs short of memory. The kubelet waits for the grace period. "
             "Images are garbage collected when disk usage exceeds 85 percent.")
    assert answer_sentence(chunk, "the kubelet waits for the grace period") == "The kubelet waits for the grace period."
    assert answer_sentence(chunk, "Unused images get collected once disk usage goes over 85 percent") == \
        "Images are garbage collected when disk usage exceeds 85 percent."
    assert answer_sentence(chunk, "It restarts the container with an exponential back-off") is None
