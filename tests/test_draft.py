"""The draft's checks, its confidence, the decision on it, and the answer's token probability."""

from __future__ import annotations

import math

import pytest

from program.lm.token_scores import field_text_probability
from program.stages.decision import decide, holds_up
from program.question import asked_names, premise_terms
from program.stages.draft import ConfidenceModel, DraftEvidence, check_draft
from program.types import Action, Strip

Q = "What is the default maxUnavailable for a Deployment's rolling update?"
ANSWERING = Strip("deployment.md#4", 0,
                  "For a Deployment, maxUnavailable is an optional field; the default value is 25%.")
OTHER = Strip("daemonset.md#2", 0, "A DaemonSet rolling update replaces one pod at a time by default.")


def test_premise_terms_are_the_questions_names_numbers_and_code_terms():
    assert premise_terms(Q) == {"maxunavailable", "deployment"}
    assert premise_terms("Which port does etcd 3.5 listen on?") == {"3.5"}
    assert premise_terms("How many days does PTO accrue at Acme after 90 days?") == {"pto", "acme", "90"}


def test_a_right_draft_holds_its_words_and_premise_in_the_passage_it_cites():
    e = check_draft(Q, "The default maxUnavailable is 25% [1].", [ANSWERING, OTHER], {"deployment.md#4": 0.9}, 0.8)
    assert (e.support, e.premise, e.cited, e.passage_score, e.token_probability) == (1.0, 1.0, 1.0, 0.9, 0.8)
    assert e.sentence_support == 1.0 and not e.abstained


def test_an_uncited_draft_is_checked_against_the_passage_holding_its_words():
    # the bug: without a marker the checks read every passage, so a look-alike's premise
    # stood in some other passage
    e = check_draft(Q, "It replaces one pod at a time.", [ANSWERING, OTHER], {}, None)
    assert e.cited == 0.0 and e.support == 1.0
    assert e.premise == 0.0  # neither "maxUnavailable" nor "Deployment" is in the DaemonSet passage
    assert e.token_probability == 0.5 and e.passage_score == 0.5  # unknown: the middle



@pytest.mark.parametrize("answer, support", [
    ("There are 5 bells in the Vellmar Clock Tower.", 0.5),  # was 0.0: "5" was not a word of its own
    ("There are five bells in the Vellmar Clock Tower.", 0.5),
    ("There are 7 bells in the Vellmar Clock Tower.", 0.0),
])
def test_a_number_counts_among_the_drafts_own_words_however_written(answer, support):
    # the blind injection set's train half (blind-034): the draft wrote "5" for the passage's "five",
    # its support fell to 0 and the question was declined
    tower = Strip(source_id="t#0", position=0, text="The Vellmar Clock Tower stands in the market square. "
                                                     "The tower contains five bells, the largest weighing 2.1 tonnes.")
    e = check_draft("How many bells are in the Vellmar Clock Tower?", answer, [tower], {"t#0": 0.9}, 0.9)
    assert e.support == support

def test_an_abstaining_draft_has_no_support_and_confidence_zero():
    e = check_draft(Q, "I don't know.", [ANSWERING], {}, 0.99)
    assert e.abstained and e.support == 0.0
    assert ConfidenceModel().score(e) == 0.0


def test_confidence_is_the_logistic_of_the_weighted_checks():
    model = ConfidenceModel(weights={"support": 2.0, "premise": 1.0}, bias=-1.0)
    e = DraftEvidence(support=1.0, premise=0.5)
    assert model.score(e) == pytest.approx(1 / (1 + math.exp(-1.5)), abs=1e-4)
    assert ConfidenceModel.from_dict(model.to_dict()) == model
    with pytest.raises(ValueError, match="must be numbers"):
        ConfidenceModel.from_dict({"weights": {"support": "high"}})


@pytest.mark.parametrize("evidence, confidence, best, action", [
    (DraftEvidence(abstained=True), 0.0, 0.9, Action.INCORRECT),
    (DraftEvidence(support=1.0, premise=1.0), 0.7, 0.9, Action.CORRECT),
    (DraftEvidence(support=1.0, premise=1.0), 0.4, 0.9, Action.AMBIGUOUS),
    (DraftEvidence(support=0.2, premise=1.0), 0.4, 0.9, Action.INCORRECT),   # its words are not in its source
    (DraftEvidence(support=1.0, premise=0.0), 0.4, 0.9, Action.INCORRECT),   # the question's terms are not
    (DraftEvidence(support=1.0, premise=1.0), 0.4, 0.01, Action.INCORRECT),  # no passage reaches lower
])
def test_the_decision_routes_on_the_draft_and_the_scores(evidence, confidence, best, action):
    decision = decide(evidence, confidence, best, accept=0.5, lower=0.05)
    assert decision.action is action and decision.reasons


def test_the_decision_refuses_an_operating_point_outside_0_1():
    with pytest.raises(ValueError, match="accept and lower"):
        decide(DraftEvidence(), 0.5, 0.5, accept=2.0, lower=0.1)


def _token(text, logprob):
    return {"token": text, "logprob": logprob}


def test_the_answers_probability_skips_format_and_citation_tokens():
    content = [_token("[[", 0), _token(" ##", 0), _token(" answer", 0), _token(" ##", 0), _token(" ]]\n", 0),
               _token("The", -0.1), _token(" default", -0.2), _token(" is", -0.05), _token(" 25", -1.0),
               _token("%", -0.3), _token(" [", 0), _token("3", -3.0), _token("]", 0), _token(".", 0),
               _token("\n\n", 0), _token("[[", 0), _token(" ##", 0), _token(" completed", -5.0)]
    # "25" counts (a number is an answer word); "%", "[3]" and the next field do not
    assert field_text_probability({"content": content}, "answer") == pytest.approx(math.exp(-1.35 / 4), abs=1e-4)
    assert field_text_probability({"content": content}, "query") is None
    assert field_text_probability(None, "answer") is None


@pytest.mark.parametrize("question, names", [
    ("What's the Velero command to back up a whole namespace?", {"velero"}),
    ("Our /health endpoint answers with a 302 redirect. Will the kubelet restart it?", set()),  # a user's value
    ("Translate 'thank you' into French.", {"french"}),
    ("Summarise: 'The meeting moved from Tuesday to Thursday.'", set()),  # quoted text is the user's
    ("Can I jump from 1.29 straight to 1.31 with kubeadm?", set()),
    ("hey, you around?", set()),
])
def test_asked_names_leave_out_numbers_quotes_and_contractions(question, names):
    assert asked_names(question) == names


def test_names_the_knowledge_base_never_writes_are_unmentioned_unless_the_passages_write_them():
    velero = "What's the Velero command to back up a namespace?"
    backup = Strip("backup.md#1", 0, "Back up etcd with etcdctl snapshot save.")
    page = Strip("https://velero.io/docs", 0, "Run velero backup create NAME --include-namespaces ns.")
    assert check_draft(velero, "Run etcdctl snapshot save.", [backup], {}, 0.9, {"velero"}).unmentioned == ("velero",)
    assert check_draft(velero, "Run velero backup create.", [page], {}, 0.9, {"velero"}).unmentioned == ()
    assert check_draft(velero, "Run etcdctl snapshot save.", [backup], {}, 0.9).unmentioned == ()
    # the bug: a web page's strip about "Legg Mason" did not repeat the name; its title does
    tennis = "What sport does 2004 Legg Mason Tennis Classic play?"
    strip = Strip("web:1", 0, "The tournament was played on outdoor hard courts.",
                  title="2004 Legg Mason Tennis Classic")
    assert check_draft(tennis, "Tennis.", [strip], {}, 0.9, {"legg"}).unmentioned == ()


def test_an_unmentioned_name_makes_a_confident_draft_incorrect():
    evidence = DraftEvidence(support=1.0, premise=1.0, unmentioned=("velero",))
    decision = decide(evidence, 0.95, best_score=0.9, accept=0.5, lower=0.05)
    assert decision.action is Action.INCORRECT
    assert decision.reasons == ["the knowledge base never mentions 'velero'"]
    assert not holds_up(evidence, 0.95, 0.5)
    assert ConfidenceModel().score(evidence) == 0.0 < ConfidenceModel().score(DraftEvidence(support=1.0, premise=1.0))


def test_numbers_the_passages_never_write_are_not_grounded():
    # the failing drafts: "$15" for business cards and "1.5 weeks" from passages without them
    cards = Strip("cards.md#1", 0, "Order business cards through the print shop; allow three business days.")
    assert check_draft("How much do business cards cost?", "$15 [1]", [cards], {}, 0.9).numbers_grounded == 0.0
    assert check_draft("How far ahead do I order?", "3 business days [1].", [cards], {}, 0.9).numbers_grounded == 1.0
    # the question's own numbers are the user's, and an answer without numbers has none to invent
    assert check_draft("Is 16 characters enough?", "Yes, 16 is the minimum.", [cards], {}, 0.9).numbers_grounded == 1.0
    assert check_draft("Where do I order cards?", "The print shop [1].", [cards], {}, 0.9).numbers_grounded == 1.0
    both = check_draft("How long?", "Between 3 and 7 days [1].", [cards], {}, 0.9)
    assert both.numbers_grounded == 0.5


@pytest.mark.parametrize("question, times", [
    ("What will the monthly fee be in 2075?", {"2075"}),
    ("What was the fee in March 2031?", {"2031"}),
    ("What will it cost several decades from now?", {"several decades from now"}),
    ("What is the fee in 40 years?", {"40 years from now"}),
    ("Can I set the memory limit to 2048 MiB?", set()),  # a user's own value, not a year
    ("The pod sets runAsUser: 1000 but the container sets runAsUser: 2000", set()),
    ("Is API version 2024-03-01 the same thing as the v2 API?", set()),  # a version's date is a name
    ("How many days do I have to dispute a charge?", set())])
def test_the_time_a_question_is_set_at_is_one_of_its_premises(question, times):
    from program.question import asked_times

    assert asked_times(question) == times
