"""The deterministic parts of each judgment: action thresholds, strip scores, support verdicts."""

from __future__ import annotations

import pytest

from program.stages.decision import evaluator_action
from program.stages.evaluator import score_grade
from program.stages.refine import decompose, score_span
from program.stages.selfcheck import is_abstention, judge_support, lexical_support, strip_citations
from program.types import Action, Passage


@pytest.mark.parametrize(
    "best, action",
    [
        (1.0, Action.CORRECT),
        (0.6, Action.CORRECT),  # upper is inclusive
        (0.4, Action.AMBIGUOUS),
        (0.2, Action.AMBIGUOUS),  # lower is inclusive for "not incorrect"
        (0.19, Action.INCORRECT),
        (0.0, Action.INCORRECT),
    ],
)
def test_the_evaluator_alone_maps_the_best_score_to_an_action(best, action):
    # CRAG's paper mapping, with which the compile calibrates the passage judge; the route
    # decides on the draft as well (program.stages.decision.decide, tests/test_draft.py)
    assert evaluator_action(best, lower=0.2, upper=0.6) is action
    assert evaluator_action(best, lower=0.2, upper=0.6) == action.value  # a str, as training compares it


@pytest.mark.parametrize("similarity, expected", [
    (0.75, (0.75, "relevant")),
    (0.6, (0.6, "relevant")),  # upper is inclusive
    (0.5, (0.5, "partial")),  # tests' ListKnowledgeBase passages
    (0.2, (0.2, "partial")),  # lower too
    (0.19, (0.19, "irrelevant")),
    (-0.3, (0.0, "irrelevant")),  # a cosine below 0 is clipped
    (1.2, (1.0, "relevant")),
])
def test_without_a_trained_judge_a_passage_scores_its_retrieval_similarity(similarity, expected):
    """CRAG's evaluator asks no LM (``ask_lm=False``): with no trained judge a passage's score is its
    retrieval similarity in [0, 1], named by the thresholds."""
    from program.stages.evaluator import similarity_grade

    grade = similarity_grade(Passage("p#0", "text", score=similarity), lower=0.2, upper=0.6)
    assert (grade.score, grade.reason) == expected
    assert grade.explanation == f"retrieval similarity {expected[0]:.3f}"


def test_the_evaluator_asked_not_to_use_the_lm_makes_no_call(fake_lm):
    from program.stages.evaluator import RetrievalEvaluator

    passages = [Passage("a#0", "Acme Rockets was founded by Jane Roe.", score=0.7),
                Passage("b#0", "Bananas.", score=0.1)]
    graded = RetrievalEvaluator()(question="Who founded Acme Rockets?", passages=passages, ask_lm=False)
    assert [(g.score, g.reason) for g in graded] == [(0.7, "relevant"), (0.1, "irrelevant")]
    assert sum(fake_lm.calls.values()) == 0
    asked = RetrievalEvaluator()(question="Who founded Acme Rockets?", passages=passages)  # the LM grader
    assert [(g.score, g.reason) for g in asked] == [(1.0, "relevant"), (0.0, "irrelevant")]
    assert fake_lm.calls["GradeRetrieval"] == 2


@pytest.mark.parametrize(
    "same, answers, outdated, expected",
    [
        (True, True, False, (1.0, "relevant")),
        (False, True, False, (0.6, "partial")),
        (True, False, False, (0.4, "partial")),
        (False, False, False, (0.0, "irrelevant")),
        (True, True, True, (0.3, "stale")),
        (False, False, True, (0.0, "irrelevant")),
    ],
)
def test_score_grade_table(same, answers, outdated, expected):
    score, reason = score_grade(same, answers, outdated)
    assert (round(score, 2), reason) == expected


def test_decompose_splits_sentences_and_joins_fragments():
    passage = Passage("d#0", "Early life. Jane Roe was born in Hobart in 1950.\n"
                             "She founded Acme Rockets in 1999 with two friends.")
    strips = decompose(passage)
    assert [s.text for s in strips] == [
        "Early life. Jane Roe was born in Hobart in 1950.",
        "She founded Acme Rockets in 1999 with two friends.",
    ]
    assert [(s.source_id, s.position) for s in strips] == [("d#0", 0), ("d#0", 1)]


# The help centre's phishing page: cut from its lead-in, the last item read as advice, and both
# crag and self-crag told a user to "move money to a 'safe account'", citing the bullet.
PHISHING = """Paylane will **never** ask you, by email, chat, phone or in a help article, to:

- send a card number or CVC,
- move money to a "safe account" or pay a fee to unlock payouts.

Verification documents are requested only inside the Dashboard."""


def test_decompose_keeps_a_list_item_with_its_lead_in():
    lead_in = "Paylane will **never** ask you, by email, chat, phone or in a help article, to:"
    assert [s.text for s in decompose(Passage("phishing#1", PHISHING))] == [
        f"{lead_in} - send a card number or CVC,",
        f'{lead_in} - move money to a "safe account" or pay a fee to unlock payouts.',
        "Verification documents are requested only inside the Dashboard.",
    ]


def test_a_list_without_a_lead_in_and_the_sentence_after_a_list_stand_alone():
    text = ("Roll your keys after a leak.\n1. Open Settings and choose API keys.\n"
            "2. Press Roll on each live key.\nThe old keys stop at once.")
    assert [s.text for s in decompose(Passage("keys#0", text))] == [
        "Roll your keys after a leak.", "1. Open Settings and choose API keys.", "2. Press Roll on each live key.",
        "The old keys stop at once."]


def test_advice_a_list_s_lead_in_forbids_is_not_supported_by_its_item():
    strip = decompose(Passage("phishing#1", PHISHING))[1].text
    assert lexical_support("To unlock payouts, move money to a safe account.", strip) == "no"
    assert lexical_support("Paylane will never ask you to move money to a safe account.", strip) == "fully"


@pytest.mark.parametrize(
    "span, score",
    [
        ("Maurizio Ponzi", 1.0),
        ("[[ ## answer_span ## ]] maurizio ponzi.", 1.0),  # markers, case and punctuation ignored
        ("Ponzi, Maurizio", 0.5),  # the strip's words, not verbatim
        ("Federico Fellini", 0.0),  # words the strip does not contain
        ("NONE", 0.0),
        ("", 0.0),
    ],
)
def test_score_span_checks_the_copy_against_the_strip(span, score):
    strip = "Son contento is a 1983 Italian comedy film directed by Maurizio Ponzi."
    assert score_span(span, strip) == score


@pytest.mark.parametrize(
    "span, strip, score",
    [
        # the failing inputs (the blind injection set's train half): the 1.5B model found the
        # answer and wrote its number in digits, and the strip was dropped as not copied
        ("12 seconds", "Hold the recessed reset button on the back panel for twelve seconds.", 1.0),
        ("47", "It has forty-seven arches across the Vesse valley.", 1.0),
        ("26", "It has twenty-six locks over 19 miles.", 1.0),
        ("November 1st", "It opens for the season on the first of November.", 0.5),
        ("twelve seconds", "Hold the button for 12 seconds.", 1.0),  # and the other way round
        ("13", "It has twenty-six locks over 19 miles.", 0.0),  # another number
        ("5", "The canal closed in 1958.", 0.0),  # a copy is whole words, not part of one
        ("9", "The canal closed in 1958.", 0.0),
    ],
)
def test_score_span_reads_spelled_numbers_as_their_digits(span, strip, score):
    assert score_span(span, strip) == score


EVIDENCE = "Acme Rockets was founded by Jane Roe in 1999. It is based in Ohio and employs 40 people."


@pytest.mark.parametrize(
    "claim, quote, verdict",
    [
        ("Acme Rockets was founded by Jane Roe [1].", "Acme Rockets was founded by Jane Roe in 1999.", "fully"),
        ("Jane Roe founded Acme Rockets in 1999, as mentioned in strip [1].",
         "Acme Rockets was founded by Jane Roe in 1999.", "fully"),
        ("Acme Rockets was founded by Elon Musk.", "Acme Rockets was founded by Jane Roe in 1999.",
         "no"),  # another name
        ("Acme Rockets was founded in 2005.", "Acme Rockets was founded by Jane Roe in 1999.", "no"),  # another number
        ("Acme Rockets was not founded by Jane Roe.", "Acme Rockets was founded by Jane Roe in 1999.",
         "no"),  # negation
        ("Acme Rockets builds satellites in Ohio.", EVIDENCE, "partially"),  # 3 of 5 content words
        ("Acme Rockets was founded by Jane Roe.", "Acme Rockets was founded by Jane Roe on the Moon.",
         "no"),  # invented quote
        ("Acme Rockets was founded by Jane Roe.", "NONE", "no"),
        ("It employs forty people.", "It is based in Ohio and employs 40 people.", "fully"),  # the number spelled
        ("It employs fifty people.", "It is based in Ohio and employs 40 people.", "no"),
    ],
)
def test_judge_support_verdicts(claim, quote, verdict):
    assert judge_support(claim, quote, EVIDENCE) == verdict


def test_abstentions_and_citation_stripping():
    assert is_abstention("I don't know.") and is_abstention("") and not is_abstention("Jane Roe [1].")
    assert strip_citations("Jane Roe founded it [1][2], as mentioned in strip [1].") == "Jane Roe founded it."


def test_possessive_claim_is_supported_by_its_evidence():
    # the failing case from the README's question: "Espinal's" never matched "Espinal"
    from program.stages.selfcheck import judge_support

    evidence = ("Herlyn Iván Espinal Martínez (14 September 1982 – 20 July 2014) was a Honduran "
                "journalist and television reporter who worked for Hoy Mismo.")
    claim = "Herlyn Espinal's occupation is journalist and television reporter."
    assert judge_support(claim, evidence, evidence) == "fully"


def test_not_specified_in_the_context_is_an_abstention():
    from program.stages.selfcheck import is_abstention

    assert is_abstention("Espinal's occupation is not specified in the given context.")
    assert not is_abstention("Espinal was a journalist.")


def test_a_hyphenated_name_does_not_fail_a_claim_its_evidence_states_word_for_word():
    # failing dev row: names() kept "In-person" whole while words() split it, so the name was never found
    from program.stages.selfcheck import judge_support
    from program.text import names

    claim = "In-person payments on Paylane Terminal can be captured within 2 days."
    assert judge_support(claim, claim, claim) == "fully"
    assert names("Legacy Read-only users") == {"legacy", "read"}


@pytest.mark.parametrize(
    "question, claim, evidence, verdict",
    [
        # failing PopQA dev claims: the one word a short answer adds is its answer, and it was missing
        ("What is John D. Maurice's occupation?", "Maurice was a politician.",
         "John D. Maurice is an American journalist.", "no"),
        ("What is Jean Gabriel Marie's occupation?", "Jean Gabriel Marie was a politician.",
         "Jean Gabriel Marie (1907–1970) was a French composer.", "no"),
        ("What sport does Meade play?", "Meade plays fencing.",
         "He also plays football for the Montserrat football team as a goalkeeper.", "no"),
        # the answer in the evidence's own words still holds
        ("In what city was Gyula Czimra born?", "was born in Budapest.",
         "Czimra Gyula (Budapest, 1901 - Budapest, 1966) was a Hungarian footballer.", "partially"),
        ("What is John D. Maurice's occupation?", "Maurice was a journalist.",
         "John D. Maurice is an American journalist.", "fully"),
    ],
)
def test_a_claim_must_hold_its_answer_words(question, claim, evidence, verdict):
    from program.stages.selfcheck import answer_words, lexical_support

    assert lexical_support(claim, evidence, question) == verdict
    assert answer_words("Maurice was a politician.", "What is John D. Maurice's occupation?") == {"politician"}


def test_without_the_question_a_claim_is_checked_as_before():
    from program.stages.selfcheck import lexical_support

    # half the claim's words: partially supported when the question is unknown (adversarial rows)
    assert lexical_support("Maurice was a politician.", "John D. Maurice is an American journalist.") == "partially"


def test_the_evaluator_scores_from_token_probabilities_when_asked():
    """With ``probabilities``, GradeRetrieval's score is 0.6 p(answers) + 0.4 p(same entity)
    from the LM's token probabilities; without, from the sampled words (the same replies)."""
    import dspy

    from program.stages.evaluator import RetrievalEvaluator
    from program.types import Passage
    from signatures import GradeRetrieval
    from tests.fake_lm import FakeLM, P

    lm = FakeLM({GradeRetrieval: lambda i: {"same_entity": P(0.9), "answers_question": P(0.45), "outdated": P(0.1)}})
    passage = Passage("refunds.md#1", "Refunds take 5-10 business days.")
    with dspy.context(lm=lm):
        (graded,) = RetrievalEvaluator(probabilities=True)(question="How long do refunds take?", passages=[passage])
        (worded,) = RetrievalEvaluator()(question="How long do refunds take?", passages=[passage])
    assert graded.score == pytest.approx(0.6 * 0.45 + 0.4 * 0.9) and graded.reason == "partial"
    assert "p(answers)=0.45" in graded.explanation
    assert (worded.score, worded.reason) == (0.4, "partial")  # "True", "False", "False"


@pytest.mark.parametrize("same, answers, outdated, expected", [
    (0.95, 0.9, 0.0, (0.92, "relevant")),
    (0.1, 0.1, 0.0, (0.1, "irrelevant")),
    (0.9, 0.9, 0.7, (0.3, "stale")),
])
def test_score_grade_reads_probabilities(same, answers, outdated, expected):
    score, reason = score_grade(same, answers, outdated)
    assert (round(score, 4), reason) == expected


def test_an_lm_without_log_probabilities_is_read_by_its_words(monkeypatch):
    """The bug this guards against: asking a provider that refuses ``logprobs`` for them made
    every grade "unparseable" (score 0); such an LM is asked for the words only."""
    import dspy

    from program.stages.evaluator import RetrievalEvaluator
    from program.types import Passage
    from signatures import GradeRetrieval
    from tests.fake_lm import FakeLM, P

    lm = FakeLM({GradeRetrieval: lambda i: {"same_entity": P(0.9), "answers_question": P(0.45), "outdated": P(0.1)}})
    monkeypatch.setattr(type(lm.engine), "logprobs", False)
    with dspy.context(lm=lm):
        (grade,) = RetrievalEvaluator(probabilities=True)(question="How long?", passages=[Passage("a#1", "Refunds.")])
    assert (grade.score, grade.reason) == (0.4, "partial")


@pytest.mark.parametrize("claim, verdict", [
    # the help centre's test run: "You" was read as a name the strip lacks, so the answer cited nothing
    ("You can send up to $25,000 in a single payout.", "partially"),
    ("One account can create up to 50 restricted API keys.", "no"),  # "50" is not the strip's number
    ("Dana Payne can send up to $25,000 in a single payout.", "no"),  # a name after the first word still counts
])
def test_a_sentence_s_first_word_is_not_a_name(claim, verdict):
    question = "What's the most I can send in a single Relay payout?"
    assert judge_support(claim, "Up to **$25,000 per Relay payout**.", "- Up to **$25,000 per Relay payout**.",
                         question) == verdict
