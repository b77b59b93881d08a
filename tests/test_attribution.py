"""Citations by attribution (issue: answers that cite their sources), and footnote markers."""

from __future__ import annotations

import pytest

from program.stages.attribution import answer_sentences, attribute, citation_quality, clauses
from program.text import without_footnotes
from program.types import Strip

STRIPS = [
    Strip("dune#0", 0, "Dune is a 1965 science-fiction novel by Frank Herbert.", url="kb/dune.md", title="Dune"),
    Strip("dune#1", 1, "It won the Hugo Award in 1966, tied with This Immortal.", url="kb/dune.md", title="Dune"),
    Strip("arrakis#0", 0, "Arrakis is a desert planet, the only source of the spice melange.", title="Arrakis"),
]


def test_an_answer_with_no_markers_gets_them_from_attribution():
    answer, sentences, citations = attribute(
        "Who wrote Dune and what did it win?", "Dune was written by Frank Herbert. It won the Hugo Award in 1966.",
        STRIPS)
    assert answer == "Dune was written by Frank Herbert [1]. It won the Hugo Award in 1966 [2]."
    assert [(s.cited, s.supported, s.by) for s in sentences] == [([1], True, "attribution"), ([2], True, "attribution")]
    assert [(c.number, c.source_id, c.title, c.sentences) for c in citations] == [
        (1, "dune#0", "Dune", [0]), (2, "dune#1", "Dune", [1])]
    assert citations[0].text == STRIPS[0].text and citations[0].url == "kb/dune.md"


def test_a_wrong_marker_is_corrected_and_a_right_one_kept():
    answer, sentences, _ = attribute(
        "Who wrote Dune?", "Dune was written by Frank Herbert [3]. It won the Hugo Award in 1966 [2].", STRIPS)
    assert answer == "Dune was written by Frank Herbert [1]. It won the Hugo Award in 1966 [2]."
    assert [s.by for s in sentences] == ["attribution", "model"]


def test_of_two_markers_only_the_supporting_one_stays():
    answer, sentences, citations = attribute("Who wrote Dune?", "Frank Herbert wrote Dune [1][3].", STRIPS)
    assert answer == "Frank Herbert wrote Dune [1]."
    assert sentences[0].cited == [1] and sentences[0].by == "attribution"
    assert [c.number for c in citations] == [1]


def test_a_sentence_no_strip_supports_cites_nothing_and_is_marked():
    answer, sentences, citations = attribute(
        "Who wrote Dune?", "Dune was written by Frank Herbert [1]. It was filmed by Denis Villeneuve in 2021 [2].",
        STRIPS)
    assert answer == "Dune was written by Frank Herbert [1]. It was filmed by Denis Villeneuve in 2021."
    assert [(s.supported, s.by, s.cited) for s in sentences] == [(True, "model", [1]), (False, "none", [])]
    assert [(c.number, c.sentences) for c in citations] == [(1, [0])]


def test_a_marker_after_the_full_stop_belongs_to_the_sentence_before():
    assert answer_sentences("Herbert wrote it. [1] It won the Hugo. [2]") == [
        "Herbert wrote it [1].", "It won the Hugo [2]."]


# the last: a crag answer on PopQA dev, counted as an uncited statement before "not directly" was read
@pytest.mark.parametrize("answer", ["I don't know.", "",
                                    "The capital of Yalutorovsky District is not directly mentioned in the context."])
def test_an_abstention_cites_nothing(answer):
    assert attribute("Who wrote Dune?", answer, STRIPS) == (answer, [], [])


def test_with_no_strips_the_answer_is_unchanged():
    assert attribute("Who wrote Dune?", "Frank Herbert [1].", []) == ("Frank Herbert [1].", [], [])


@pytest.mark.parametrize("text, expected", [
    ("Paris is the capital.[3] It has 2 million people[citation needed].",
     "Paris is the capital. It has 2 million people."),
    ("Mozart was born in Salzburg[1][2] in 1756.[a]", "Mozart was born in Salzburg in 1756."),
    ("the river [note 4] and its delta [when?] flood", "the river and its delta flood"),
    ("as cited.[12]: 34 Next", "as cited. Next"),
    # not footnotes: code indices and Markdown links keep their brackets
    ("kubectl get pods -o jsonpath='{.items[0].metadata.name}'",
     "kubectl get pods -o jsonpath='{.items[0].metadata.name}'"),
    ("see [the docs](https://kubernetes.io) first", "see [the docs](https://kubernetes.io) first"),
])
def test_footnote_markers_are_removed(text, expected):
    assert without_footnotes(text) == expected


def test_footnote_markers_never_reach_a_strip():
    # the offline web snapshot's Wikipedia pages carry footnotes on 955 lines
    strip = Strip("https://en.wikipedia.org/wiki/Dune", 0, "Dune won the Hugo Award.[54][55]")
    assert strip.text == "Dune won the Hugo Award."
    answer, _, citations = attribute("What did Dune win?", "Dune won the Hugo Award.", [strip])
    assert answer == "Dune won the Hugo Award [1]." and "[54]" not in citations[0].text


def _sentence(text, cited, supported=True):
    from program.types import AnswerSentence
    return AnswerSentence(text, cited, supported, "model")


def test_citation_recall_counts_the_sentences_their_citations_support():
    sentences = [_sentence("Dune was written by Frank Herbert.", [1]),
                 _sentence("It was filmed by Denis Villeneuve in 2021.", [], False)]
    assert citation_quality("Who wrote Dune?", sentences, STRIPS) == (0.5, 1.0)


def test_citation_precision_counts_an_unneeded_citation_and_an_unsupported_ones():
    needless = [_sentence("Dune was written by Frank Herbert.", [1, 3])]  # [3] is about Arrakis
    assert citation_quality("Who wrote Dune?", needless, STRIPS) == (1.0, 0.5)
    wrong = [_sentence("Dune was written by Frank Herbert.", [3])]
    assert citation_quality("Who wrote Dune?", wrong, STRIPS) == (0.0, 0.0)
    assert citation_quality("Who wrote Dune?", [], STRIPS) == (None, None)


# self-crag's right help-centre answer (adversarial test run 2 of the list lead-in change) cited
# nothing: each clause is one strip's, and no strip states both.
IDEMPOTENCY = [
    Strip("idempotency.md#2", 0, "Keys can be up to **255 characters**."),
    Strip("idempotency.md#2", 1, "- If you reuse a key with **different parameters**, Paylane rejects the request with "
                                 "HTTP `409` and the error code `idempotency_key_reused`."),
    Strip("webhooks.md#2", 2, "Reject events whose timestamp is more than **5 minutes** old."),
]
COMPOUND = ("The maximum length of an Idempotency-Key is 255 characters, and if you reuse a key with different "
            "parameters, Paylane rejects the request with an HTTP `409` and the error code `idempotency_key_reused`.")


def test_a_sentence_of_two_clauses_cites_the_strip_of_each():
    question = "How long can an Idempotency-Key be, and what happens if I reuse one with a different amount?"
    answer, sentences, citations = attribute(question, COMPOUND, IDEMPOTENCY)
    assert answer.endswith("`idempotency_key_reused` [1][2].")
    assert [(s.cited, s.supported, s.by) for s in sentences] == [([1, 2], True, "attribution")]
    assert citation_quality(question, sentences, IDEMPOTENCY) == (1.0, 1.0)


def test_a_clause_no_strip_states_leaves_the_sentence_uncited():
    question = "How long can an Idempotency-Key be?"
    sentence = "Keys can be up to 255 characters, and Paylane keeps every key for 90 days."
    _, sentences, citations = attribute(question, sentence, IDEMPOTENCY)
    assert [(s.cited, s.supported) for s in sentences] == [([], False)] and citations == []


def test_clauses_split_only_where_independent_clauses_join():
    assert clauses("Darko Dimitrov and Lazar Cvetkovski composed it.") == [
        "Darko Dimitrov and Lazar Cvetkovski composed it."]
    assert clauses("It costs 1%; payouts take two days.") == ["It costs 1%", "payouts take two days."]
    assert clauses("Yes, and fast.") == ["Yes, and fast."]  # a two-word part is no clause


# crag's help-centre answer (adversarial test, clause run) came out "…Lane Capital Bank, N [2]. A.
# about Paylane": a marker after an abbreviation's stop was moved before it, and the sentence cut.
def test_a_marker_after_an_abbreviation_stays_in_its_sentence():
    card = [Strip("paylane-card.md#1", 0, "The card is issued by **Lane Capital Bank, N.A.**, "
                                          "Paylane's banking partner, "
                                          "under licence from Visa.")]
    answer, sentences, _ = attribute("Which bank issues the Paylane card?",
                                     "The card is issued by Lane Capital Bank, N.A. [1] under licence from Visa.", card)
    assert answer == "The card is issued by Lane Capital Bank, N.A. under licence from Visa [1]."
    assert [s.cited for s in sentences] == [[1]]


# the handbook's answer (ask --kb eval_sets/handbook/kb, "How long does a detail assignment last?")
# came out "…If the [1] detailee has gone up in GS level, … due to [1] federal policy …": the reader
# copied hard-wrapped lines, and each line was cited as a sentence of its own
def test_a_sentence_the_reader_copied_over_several_lines_is_one_sentence():
    source = [Strip("external-details.md#3", 0,
                    "Details last for 120 days. If the detailee has gone up in GS level, their detail must end at "
                    "120 days, due to federal policy and bargaining unit (union) contracts around temporary "
                    "promotions.")]
    copied = ("Details last for 120 days [1].\n- It can be extended once [1].\nIf the\ndetailee has gone up in GS "
              "level, their detail must end at 120 days, due to\nfederal policy and bargaining unit (union) contracts "
              "around temporary\npromotions [1].")
    assert answer_sentences(copied) == [
        "Details last for 120 days [1].", "- It can be extended once [1].",
        "If the detailee has gone up in GS level, their detail must end at 120 days, due to federal policy and "
        "bargaining unit (union) contracts around temporary promotions [1]."]
    # the reader's own draft: a list item whose continuation lines are indented
    draft = ("- The employee was detailed at the same GS level they currently occupy. If the\n  detailee has gone up "
             "in GS level, their detail must end at 120 days, due to\n  federal policy and bargaining unit (union) "
             "contracts around temporary\n  promotions.")
    assert answer_sentences(draft)[1] == ("If the detailee has gone up in GS level, their detail must end at 120 days, "
                                          "due to federal policy and bargaining unit (union) contracts around "
                                          "temporary promotions.")
    answer, sentences, _ = attribute("How long does a detail last?", copied, source)
    assert answer.endswith("If the detailee has gone up in GS level, their detail must end at 120 days, due to "
                           "federal policy and bargaining unit (union) contracts around temporary promotions [1].")
    assert [s.cited for s in sentences][-1] == [1]


def test_code_and_indented_lines_are_not_joined():
    fenced = "Run these [1]:\n```\nkubectl get pods\nkubectl describe pod web\n```"
    assert answer_sentences(fenced) == ["Run these [1]:", "```", "kubectl get pods", "kubectl describe pod web", "```"]
    yaml = "Set it in the spec [1]:\nmetadata:\n  name: web\n  labels: {}"
    assert answer_sentences(yaml) == ["Set it in the spec [1]:", "metadata:", "name: web", "labels: {}"]
