"""The trained judges: features, the linear model and its JSON, choices, and CRAG run on them."""

from __future__ import annotations

import json
import re
import zlib

import numpy as np
import pytest

from program.judges import JudgeChoice, JudgeSet, JudgesFileError, LinearJudge, load_judges, save_judges
from program.judgments import STRIP
from program.question import entity_names
from program.judgments.passage import PASSAGE_NAMES, passage_features
from program.judgments.strip import STRIP_NAMES
from program.judgments.support import SUPPORT_NAMES
from program.judgments.features import cue_pairs, name_phrase
from program.stages.crag import CRAG
from program.stages.stale import set_aside_stale, source_status
from program.types import Action, ChunkGrade, Passage
from tests.conftest import FOUNDING, FakeWeb, ListKnowledgeBase

Q = "Who founded Acme Rockets?"
OFF_TOPIC = "The Danube flows through ten countries. It is Europe's second-longest river."


class WordEmbedder:
    """Bag of hashed words in 64 dimensions, L2-normalised: deterministic and instant."""

    def encode(self, texts):
        out = np.zeros((len(texts), 64))
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[i, zlib.crc32(word.encode()) % 64] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def judge_on(name: str, names: list[str], feature: str, weight: float, bias: float) -> LinearJudge:
    """A judge whose logit is ``bias + weight * feature`` (standardisation off)."""
    coef = [weight if n == feature else 0.0 for n in names]
    return LinearJudge(name, names, [0.0] * len(names), [1.0] * len(names), coef, bias)


def toy_judges(**choices) -> JudgeSet:
    # passage: the question's full name in the text; strip and support: the share of content words
    return JudgeSet(
        {"passage": judge_on("passage", PASSAGE_NAMES, "name_phrase", 6.0, -3.0),
         "strip": judge_on("strip", STRIP_NAMES, "content_coverage", 8.0, -4.0),
         "support": judge_on("support", SUPPORT_NAMES, "coverage_best", 8.0, -4.0)},
        choices={k: JudgeChoice(v) for k, v in choices.items()},
        thresholds={"lower": 0.2, "upper": 0.6, "strip_keep": 0.5, "support_partially": 0.3, "support_fully": 0.7},
        embedder=WordEmbedder())


def test_entity_names_and_phrase_leave_out_the_question_word():
    assert entity_names("What is Herlyn Espinal's occupation?") == {"herlyn", "espinal"}
    assert name_phrase("In what city was John Keating born?") == "john keating"
    assert entity_names("how long do refunds take?") == set()


def test_cue_pairs_pair_question_words_with_text_words():
    pairs = cue_pairs("What is Herlyn Espinal's occupation?", "Espinal was a Honduran journalist.")
    assert "occupation|journalist" in pairs and "occupation|espinal" in pairs
    assert not any(p.startswith("herlyn|") for p in pairs)  # names are not answer-type cues


def test_passage_features_see_the_name_and_the_stale_cue():
    f = dict(zip(PASSAGE_NAMES, passage_features(Q, "This page is deprecated. " + FOUNDING, 0.7)))
    assert (f["cosine"], f["name_coverage"], f["name_phrase"], f["stale_cues"]) == (0.7, 1.0, 1.0, 1.0)


def test_linear_judge_round_trips_through_json_with_the_same_scores():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(200, 2))
    labels = (dense[:, 0] + 0.1 * rng.normal(size=200) > 0).astype(int)
    cues = [["a|x"] if y else ["a|y"] for y in labels]
    judge = LinearJudge.fit("toy", ["f0", "f1"], dense, labels, cues)
    again = LinearJudge.from_dict(json.loads(json.dumps(judge.to_dict())))
    for row, cue in [([1.0, 0.0], ["a|x"]), ([-1.0, 0.3], ["a|y"])]:
        assert again.score(row, cue) == pytest.approx(judge.score(row, cue))
    assert judge.score([2.0, 0.0], ["a|x"]) > 0.9 > 0.1 > judge.score([-2.0, 0.0], ["a|y"])


def test_linear_judge_refuses_one_class():
    with pytest.raises(ValueError, match="need both classes"):
        LinearJudge.fit("toy", ["f0"], np.zeros((3, 1)), np.ones(3))


def test_judge_choice_band():
    assert JudgeChoice("cascade", (0.3, 0.7)).asks_lm(0.5)
    assert not JudgeChoice("cascade", (0.3, 0.7)).asks_lm(0.9)
    assert not JudgeChoice("trained").asks_lm(0.5) and JudgeChoice("lm").asks_lm(0.99)


def test_crag_on_trained_judges_makes_no_judging_call(fake_lm):
    program = CRAG(ListKnowledgeBase([FOUNDING + " It builds small sounding rockets for university teams.", OFF_TOPIC]),
                   web=FakeWeb([]), judges=toy_judges())
    result = program(question=Q)
    assert result.action is Action.CORRECT
    assert [g.reason for g in result.grades] == ["relevant", "irrelevant"]
    assert result.grades[0].score == pytest.approx(1 / (1 + np.exp(-3.0)), abs=1e-4)
    # the passages are read whole, as plain RAG reads them (no strip filter on the knowledge base);
    # the trained scores are evidence about the draft, not a gate on what it reads
    assert [s.text for s in result.strips] == [FOUNDING + " It builds small sounding rockets for university teams.",
                                               OFF_TOPIC]
    assert result.draft_checks["passage_score"] == pytest.approx(1 / (1 + np.exp(-3.0)), abs=1e-4)
    assert [(c.support, c.kept) for c in result.claims] == [("fully", True)]
    # the evaluator and the support check cost no LM call: only the draft does
    assert dict(fake_lm.calls) == {"GenerateAnswer": 1}
    assert result.trace.lm_calls == 1


def test_cascade_asks_the_lm_only_inside_the_band(fake_lm):
    """The evaluator's cascade asks GradeRetrieval only for a trained score inside its band."""
    from program.stages.evaluator import RetrievalEvaluator

    judges = toy_judges(passage="cascade", strip="trained", support="trained")
    passages = ListKnowledgeBase([FOUNDING, OFF_TOPIC]).passages
    judges.choices["passage"] = JudgeChoice("cascade", (0.96, 1.0))  # the scores are 0.953 and 0.047: outside
    RetrievalEvaluator(judges=judges)(question=Q, passages=passages)
    assert fake_lm.calls["GradeRetrieval"] == 0
    judges.choices["passage"] = JudgeChoice("cascade", (0.0, 0.5))  # OFF_TOPIC's 0.047 is inside
    grades = RetrievalEvaluator(judges=judges)(question=Q, passages=passages)
    assert fake_lm.calls["GradeRetrieval"] == 1
    assert grades[1].explanation.startswith("trained 0.047 inside the band (0.0, 0.5): LM grade")


def test_crag_never_asks_the_cascade_s_lm(fake_lm):
    """CRAG scores passages with the cheap judges only (an LM grade per passage costs what the
    whole draft costs): inside the cascade's band the trained score stands."""
    judges = toy_judges(passage="cascade", strip="trained", support="trained")
    judges.choices["passage"] = JudgeChoice("cascade", (0.0, 0.5))  # OFF_TOPIC's 0.047 is inside
    result = CRAG(ListKnowledgeBase([FOUNDING, OFF_TOPIC]), web=FakeWeb([]), judges=judges)(question=Q)
    assert fake_lm.calls["GradeRetrieval"] == 0 and dict(fake_lm.calls) == {"GenerateAnswer": 1}
    assert [(g.reason, g.explanation) for g in result.grades] == [("relevant", "trained judge 0.953"),
                                                                  ("irrelevant", "trained judge 0.047")]


def test_unsupported_claim_scored_by_the_support_judge(fake_lm):
    from program.stages.selfcheck import ClaimChecker
    from program.types import Strip

    checker = ClaimChecker(judges=toy_judges())
    claims = checker(question=Q, answer="Acme Rockets was founded by Elon Musk in 2002 [1].",
                     strips=[Strip("doc0#0", 0, FOUNDING)])
    # checked without the asked entity's name: "was founded by Elon Musk in 2002", one word of four in FOUNDING
    assert claims[0].support == "no" and claims[0].score == pytest.approx(1 / (1 + np.exp(2.0)), abs=1e-4)
    assert fake_lm.calls["CheckClaimSupport"] == 0


def test_a_claim_naming_the_asked_entity_in_full_is_supported_by_its_surname(fake_lm):
    # the bug: "William Perry Hay was born in Eureka, Illinois." fell back for want of "William Perry"
    from program.stages.selfcheck import ClaimChecker, without_asked_entity
    from program.types import Strip

    question = "In what city was William Perry Hay born?"
    claim = "William Perry Hay was born in Eureka, Illinois."
    assert without_asked_entity(claim, question) == "was born in Eureka, Illinois."
    claims = ClaimChecker()(question=question, answer=claim,
                            strips=[Strip("d#0", 0, "Hay was born in Eureka, Illinois, in 1872.")])
    assert claims[0].support == "fully" and fake_lm.calls["CheckClaimSupport"] == 0
    assert without_asked_entity("Jane Roe.", "Who is Jane Roe?") == "Jane Roe."  # nothing left to check alone


def test_stale_page_is_set_aside_when_a_current_one_is_usable():
    old = Passage("api-keys-v1-deprecated.md#0", "Deprecated: v1 keys start with pk_.",
                  title="API keys v1 (deprecated)")
    new = Passage("api-keys-v2.md#0", "Keys start with plk_.", title="API keys")
    forum = Passage("seller-community-tips.md#0", "Community tips: keys start with key_.")
    assert [source_status(p) for p in (old, new, forum)] == ["stale", "current", "community"]
    grades = [ChunkGrade(old.id, 0.9, "relevant"), ChunkGrade(new.id, 0.5, "partial"),
              ChunkGrade(forum.id, 0.7, "relevant")]
    set_aside_stale([old, new, forum], grades, lower=0.2)
    assert [g.reason for g in grades] == ["stale", "partial", "contradicts-other-source"]
    assert grades[0].explanation.startswith("set aside: says it is outdated; api-keys-v2.md#0 is current")
    assert [g.score for g in grades] == [0.9, 0.5, 0.7]  # the action still sees every score


def test_crag_refines_the_current_page_and_traces_the_stale_one(fake_lm):
    """A stale passage is set aside before the draft: only the current one is read."""
    old = "DEPRECATED. Acme Rockets was founded by John Doe in 1990."
    program = CRAG(ListKnowledgeBase([old, FOUNDING]), web=FakeWeb([]), judges=toy_judges())
    result = program(question=Q)
    assert [s.source_id for s in result.strips] == ["doc1#0"]
    assert any(e.startswith("doc0#0: set aside: says it is outdated; doc1#0 is current") for e in result.trace.events)


def test_judges_file_round_trip_and_a_corrupt_one(tmp_path):
    save_judges(toy_judges(passage="cascade"), tmp_path)
    loaded = load_judges(tmp_path)
    assert loaded.choice("passage") == JudgeChoice("cascade", (0.3, 0.7))
    assert loaded.judges["strip"].coef == toy_judges().judges["strip"].coef
    (tmp_path / "judges.json").write_text("{not json")
    with pytest.raises(JudgesFileError, match=r"judges\.json: not a judges file"):
        load_judges(tmp_path)
    assert load_judges(tmp_path / "missing") is None


def test_an_answer_that_does_not_address_the_question_gets_the_strict_retry(fake_lm):
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Jane Roe [1]."}  # supported, but whose?
    program = CRAG(ListKnowledgeBase([FOUNDING]), web=FakeWeb([]), judges=toy_judges())
    result = program(question=Q)
    assert result.retried and fake_lm.calls["GenerateStrictAnswer"] == 1
    assert "usefulness 0.0474 below 0.2: stricter retry" in result.trace.events
    assert result.answer == "Acme Rockets was founded by Jane Roe [1]."
    assert result.usefulness == pytest.approx(0.0474, abs=1e-4)  # the score that triggered the retry


def test_a_knowledge_base_gets_the_choice_measured_on_its_own_rows():
    class KB:
        def __init__(self, files):
            self.manifest = {"files": files}

    judges = toy_judges(strip="lm")
    popqa, other = KB({"knowledge_base.jsonl": "aa"}), KB({"notes.md": "bb"})
    from program.judges.store import corpus_key

    judges.choices_by_corpus = {corpus_key(popqa): {"strip": JudgeChoice("trained")}}
    assert judges.for_knowledge_base(popqa).choice("strip").use == "trained"
    assert judges.for_knowledge_base(other).choice("strip").use == "lm"
    anonymous = judges.for_knowledge_base(object())  # no manifest: the overall choice
    assert anonymous.choice("strip").use == "lm" and anonymous.corpus == ""
    assert judges.corpus == "" and anonymous.judges is judges.judges  # the set itself is left as it was
    again = JudgeSet.from_dict(json.loads(json.dumps(judges.to_dict())))
    assert again.choices_by_corpus == judges.choices_by_corpus


def test_a_current_page_that_mentions_the_deprecated_version_stays_current():
    # the bug: api-keys-v2's migration section ("v1 keys are deprecated") was taken for a stale page
    current = Passage("api-keys-v2.md#3", "## Migrating from v1\nThe v1 keys are deprecated; replace them.")
    assert source_status(current) == "current"
    assert source_status(Passage("fees-2022-archived.md#1", "Old prices.")) == "stale"
    assert source_status(Passage("x#0", "> **ARCHIVED — this pricing is no longer in effect.**")) == "stale"


def test_evaluator_thresholds_follow_the_passage_scorer_in_use():
    from program.app.compiled import evaluator_thresholds
    from program.judges.store import corpus_key

    class KB:
        manifest = {"files": {"kb.md": "cc"}}

    judges = toy_judges()
    judges.thresholds_by_corpus = {corpus_key(KB()): {"lower": 0.1, "upper": 0.3}}
    manifest = {"thresholds": {"lower": 0.05, "upper": 0.55, "source": "trained passage judge"}}
    judges = judges.for_knowledge_base(KB())
    trained = {"lower": 0.1, "upper": 0.3, "scorer": "trained passage judge"}
    assert evaluator_thresholds(manifest, judges, KB()) == trained  # its own calibration
    judges.choices_by_corpus = {corpus_key(KB()): {"passage": JudgeChoice("lm")}}
    # CRAG never asks the LM for a passage grade: the trained judge's scores keep its thresholds
    assert evaluator_thresholds(manifest, judges, KB()) == trained
    manifest["lm_thresholds_by_corpus"] = {corpus_key(KB()): {"lower": 0.65, "upper": 0.7, "dev_action_accuracy": 0.7}}
    assert evaluator_thresholds(manifest, judges, KB()) == trained
    assert evaluator_thresholds({"thresholds": {"lower": 0.3, "upper": 0.7}}, None, KB()) == \
           {"lower": 0.3, "upper": 0.7, "scorer": "retrieval similarity"}


def test_a_web_page_is_judged_with_its_title():
    from program.judgments import judged_text

    page = Passage(id="https://en.wikipedia.org/wiki/Acme_Rockets", text="It was founded by Jane Roe in 1999.",
                   source="web", title="Acme Rockets")
    assert judged_text(page) == "Acme Rockets. It was founded by Jane Roe in 1999."
    # a knowledge-base chunk is read as the training passages were; a title already leading is not repeated
    assert judged_text(Passage(id="kb#0", text=page.text, source="kb", title="Acme Rockets")) == page.text
    assert judged_text(Passage(id="w", text="Acme Rockets is a firm.", source="web",
                               title="Acme Rockets")) == "Acme Rockets is a firm."


def test_a_web_sentence_without_the_subjects_name_scores_on_its_pages_title():
    # the bug: "When BNR closed in 2002, he transferred ... to the fencing section of CS Dinamo" on the
    # page "Alexandru Chiculiță" scored 0.001 for "What sport does Alexandru Chiculiță play?"
    from program.types import Strip

    judges = toy_judges()
    judges.judges["strip"] = judge_on("strip", STRIP_NAMES, "name_phrase", 6.0, -3.0)
    sentence = "He was founded by Jane Roe in 1999."
    page = Passage(id="https://example.org/acme", text=sentence, source="web", title="Acme Rockets")
    kb_chunk = Passage(id="kb#0", text=sentence, source="kb", title="Acme Rockets")
    scores = judges.score(STRIP, question=Q, strips=[Strip(page.id, 0, sentence), Strip(kb_chunk.id, 0, sentence)],
                          passages=[page, kb_chunk])
    assert scores[0] == pytest.approx(1 / (1 + np.exp(-3.0)), abs=1e-4)
    assert scores[1] == pytest.approx(1 / (1 + np.exp(3.0)), abs=1e-4)


def test_the_correction_refines_a_web_page_the_passage_judge_scores_low(fake_lm):
    # CRAG refines every corrected document (§4.4): a page is not dropped before its strips are
    # judged. The toy passage judge wants "Acme Rockets" in the page; this one never says it.
    page = ("https://example.org/history", "Acme was founded by Jane Roe in 1999; its rockets fly for universities.")
    program = CRAG(ListKnowledgeBase([OFF_TOPIC]), web=FakeWeb([page]), judges=toy_judges(), self_check=False)
    result = program(question=Q)
    assert result.action is Action.INCORRECT
    assert [g.reason for g in result.corrected_grades] == ["irrelevant"]
    assert [s.source_id for s in result.strips] == [page[0]]
    assert not result.fallback and "Jane Roe" in result.answer


def test_the_support_judge_reads_the_claims_answer_words(fake_lm):
    # failing PopQA dev claim: "Maurice was a politician." passed on "John D. Maurice is an American
    # journalist." (half its words); the question now tells the judge which word is the answer
    from program.stages.selfcheck import ClaimChecker
    from program.types import Strip

    judges = toy_judges()
    judges.judges["support"] = judge_on("support", SUPPORT_NAMES, "answer_coverage_best", 8.0, -4.0)
    question = "What is John D. Maurice's occupation?"
    strips = [Strip("d#0", 0, "John D. Maurice is an American journalist. He won the 1975 Pulitzer Prize.")]
    wrong = ClaimChecker(judges=judges)(question=question, answer="Maurice was a politician.", strips=strips)
    right = ClaimChecker(judges=judges)(question=question, answer="Maurice was a journalist.", strips=strips)
    assert wrong[0].support == "no" and wrong[0].score == pytest.approx(1 / (1 + np.exp(4.0)), abs=1e-4)
    assert right[0].support == "fully"
    assert fake_lm.calls["CheckClaimSupport"] == 0


def test_a_retry_that_holds_up_less_does_not_replace_a_supported_answer(fake_lm):
    # failing PopQA dev question: "Warlick was born in Hickory, North Carolina." was fully supported,
    # scored low on usefulness, and its stricter retry's unsupported answer replaced it: a fallback
    import signatures

    fake_lm.rules[signatures.GenerateAnswer] = lambda i: {"answer": "Jane Roe [1]."}
    fake_lm.rules[signatures.GenerateStrictAnswer] = lambda i: {"answer": "Acme Rockets was founded by Elon Musk [1]."}
    program = CRAG(ListKnowledgeBase([FOUNDING]), web=FakeWeb([]), judges=toy_judges())
    result = program(question=Q)
    assert result.retried and fake_lm.calls["GenerateStrictAnswer"] == 1
    assert not result.fallback and result.answer == "Jane Roe [1]."
    assert "the stricter retry held up less ((0, 0.0) < (1, 1.0)): the first answer stands" in result.trace.events


def test_usefulness_borrows_the_passage_choice_of_its_knowledge_base(fake_lm):
    # failing help-centre dev answers: the trained passage judge scored 30 of 31 right answers
    # (their key facts) below the retry threshold 0.2, so self-crag retried nearly every answer there
    import signatures
    from program.stages.usefulness import UsefulnessJudge

    assert toy_judges(passage="lm").choice("usefulness").use == "lm"
    assert toy_judges(passage="cascade").choice("usefulness").use == "trained"  # the band is for passages
    assert toy_judges().choice("usefulness").use == "trained"
    judges = toy_judges(passage="lm")
    judges.choices_by_corpus, judges.corpus = {"popqa": {"passage": JudgeChoice("cascade")}}, "popqa"
    assert judges.choice("usefulness").use == "trained"
    judges.corpus = "help-centre"
    fake_lm.rules[signatures.JudgeUsefulness] = lambda i: {"useful": True}
    assert UsefulnessJudge(judges)(question=Q, answer="Jane Roe [1].") == 1.0
    assert fake_lm.calls["JudgeUsefulness"] == 1
    assert toy_judges(usefulness="trained", passage="lm").choice("usefulness").use == "trained"  # measured wins


@pytest.mark.parametrize("verdict, retried", [("maybe", False), ("False", True), ("True", False)])
def test_the_lm_usefulness_verdict_is_not_read_against_the_evaluators_probability_thresholds(fake_lm, verdict, retried):
    # the bug: the retry threshold was the evaluator's lower, .55 on the help centre once its
    # thresholds were calibrated on the LM's passage probabilities, so an unparsed usefulness
    # verdict (0.5, no verdict either way) triggered the stricter retry there
    import signatures

    fake_lm.rules[signatures.JudgeUsefulness] = lambda i: {"useful": verdict}
    program = CRAG(ListKnowledgeBase([FOUNDING]), web=FakeWeb([]), judges=toy_judges(passage="lm"),
                   lower=0.55, upper=0.55)
    result = program(question=Q)
    assert result.usefulness == {"maybe": 0.5, "False": 0.0, "True": 1.0}[verdict]
    assert (fake_lm.calls["GenerateStrictAnswer"] == 1) is retried
    assert any("(threshold 0.5)" in s.notes for s in result.trace.steps if s.step == "usefulness")


def test_the_judges_embed_each_text_once_while_it_is_cached():
    """Attribution scored every answer sentence against every strip and embedded the strips'
    sentences again each time: the cite step took a median 3.6 s, up to 43 s, of a Kubernetes
    question's 21 s (reports/kubernetes-test-60-greedy/steps.csv)."""
    import copy

    import numpy as np

    from program.judges import store

    class Counting:
        def __init__(self):
            self.asked: list[str] = []

        def encode(self, texts):
            self.asked += list(texts)
            return np.array([[float(len(t)), 1.0] for t in texts])

    judges = store.JudgeSet(judges={})
    judges.embedder = Counting()
    first = judges._encode(["a claim", "a strip sentence", "a claim"])
    assert first.shape == (3, 2) and first[0, 0] == first[2, 0] == 7.0
    again = judges._encode(["a strip sentence", "another claim"])
    assert judges.embedder.asked == ["a claim", "a strip sentence", "another claim"]
    assert again.tolist() == [[16.0, 1.0], [13.0, 1.0]]
    judges.embedder = Counting()  # another embedder: nothing of the first is reused
    judges._encode(["a claim"])
    assert judges.embedder.asked == ["a claim"]
    assert judges._encode([]).size == 0
    copy.deepcopy(judges)  # a program (and its judges) is deep-copied by DSPy's load and optimizers
