"""The asked role must stand in the strip (citations issue: the hand check's role swaps).

Every sentence and strip below is from the first cited PopQA run (reports/popqa-dev-100-cited),
where the support judge let the swapped ones cite their strip.
"""

from __future__ import annotations

import pytest

from program.stages.attribution import attribute, citation_quality
from program.stages.relation import asked_role, same_stem, states_role
from program.types import Strip

HUNT = ("The Hunt is a 2020 American horror thriller film directed by Craig Zobel and written by Nick Cuse and "
        "Damon Lindelof.")
FROM_NOW_ON = ("From Now On (Daqui P'ra Frente) is a 2007 Portuguese film directed by Catarina Ruivo, written by Ruivo "
               "and Antonio Figueiredo and produced by Paulo Branco.")
HOLTEDAHL = ("He was born in Krisitania (now Oslo, Norway) a son of geologist Olaf Holtedahl (1885–1975) and Tora "
             "Gurstad (1889–1980).")
THEODELAP = "Theodelap or Theudelapius was one of the sons of Faroald, the first Duke of Spoleto."


@pytest.mark.parametrize("question, role", [
    ("Who was the producer of Ghost?", "producer"),
    ("Who were the directors of Men and Women?", "director"),
    ("Who was the screenwriter for Tom Jones?", "screenwriter"),
    ("Who is the father of Hans Holtedahl?", "father"),
    ("What sport does John Parsons play?", ""),
    ("In what city was Gyula Czimra born?", ""),
    ("Who can issue a refund?", ""),
    ("Who is the boss of Paylane?", "boss"),  # a role ending in "s" is not a plural
])
def test_the_role_a_who_question_asks(question, role):
    assert asked_role(question) == role


@pytest.mark.parametrize("a, b, same", [
    ("producer", "produced", True), ("director", "directed", True), ("writer", "written", True),
    ("screenwriter", "screenplay", True), ("composer", "composition", True),
    ("producer", "director", False), ("author", "written", False), ("father", "faroald", False),
])
def test_same_stem(a, b, same):
    assert same_stem(a, b) is same


@pytest.mark.parametrize("sentence, strip, question, stated", [
    # swapped roles: the strip names the person in another role
    ("The producer of The Hunt was Craig Zobel.", HUNT, "Who was the producer of The Hunt?", False),
    ("David Belasco and Henry Churchill de Mille were the directors of Men and Women.",
     "Men and Women is an American play written by David Belasco and Henry Churchill de Mille.",
     "Who was the director of Men and Women?", False),
    ("Tijana composed \"To the Sky\".", "\"To the Sky\" is a song by Macedonian Serbian singer Tijana.",
     "Who was the composer of To the Sky?", False),
    # the role is stated, but for someone else
    ("The producer of From Now On was Catarina Ruivo.", FROM_NOW_ON, "Who was the producer of From Now On?", False),
    ("The producer of From Now On was Paulo Branco.", FROM_NOW_ON, "Who was the producer of From Now On?", True),
    ("Theodelap was Richard III's father.", THEODELAP, "Who is the father of Richard III of Capua?", False),
    # stated: by its stem, its kinship inverse, an author's "by", a writing role's "written by"
    ("The director of The Hunt was Craig Zobel.", HUNT, "Who was the director of The Hunt?", True),
    ("Hans Holtedahl's father is Olaf Holtedahl.", HOLTEDAHL, "Who is the father of Hans Holtedahl?", True),
    ("Theodelap's father is Faroald.", THEODELAP, "Who is the father of Theodelap of Spoleto?", True),
    ("The author of Trust Me is John Updike.",
     "Trust Me is a collection of short stories by John Updike, first published in 1987.",
     "Who is the author of Trust Me?", True),
    ("The screenplay for Grace was written by Arash Amel.",
     "The script, written by Arash Amel, was listed in the 2011 Hollywood Black List.",
     "Who was the screenwriter for Grace?", True),
    ("Henry Russell composed To The West.",
     "To The West, with words by Charles Mackay and music by Henry Russell, was one "
     "of the most popular songs.", "Who was the composer of To The West?", True),
    ("Charles Mackay was the composer of To The West.", "To The West, with words by Charles Mackay and music by Henry "
     "Russell, was one of the most popular songs.", "Who was the composer of To The West?", False),
    # not a role question, or a sentence that does not name the role: the support judge decides
    ("John Parsons plays football.", "He began writing football match reports.",
     "What sport does John Parsons play?", True),
    ("Craig Zobel.", HUNT, "Who was the producer of The Hunt?", True),
])
def test_states_role(sentence, strip, question, stated):
    assert states_role(sentence, strip, question) is stated


def test_a_swapped_role_cites_nothing_and_the_right_one_cites_its_strip():
    strips = [Strip("hunt#0", 0, HUNT), Strip("now#0", 0, FROM_NOW_ON)]
    answer, sentences, citations = attribute("Who was the producer of The Hunt?",
                                             "The producer of The Hunt was Craig Zobel.", strips)
    assert answer == "The producer of The Hunt was Craig Zobel."
    assert [(s.supported, s.by, s.cited) for s in sentences] == [(False, "none", [])] and citations == []
    answer, sentences, _ = attribute("Who was the producer of From Now On?",
                                     "From Now On was produced by Paulo Branco.", strips)
    assert answer == "From Now On was produced by Paulo Branco [2]." and sentences[0].by == "attribution"


def test_a_swapped_role_written_by_the_model_is_not_kept_and_scores_no_recall():
    strips = [Strip("hunt#0", 0, HUNT)]
    question = "Who was the producer of The Hunt?"
    answer, sentences, _ = attribute(question, "The producer of The Hunt was Craig Zobel [1].", strips)
    assert answer == "The producer of The Hunt was Craig Zobel." and sentences[0].supported is False
    sentences[0].cited = [1]  # as the model wrote it
    assert citation_quality(question, sentences, strips) == (0.0, 0.0)


def test_the_claim_check_finds_a_swapped_role_unsupported_without_the_lm(fake_lm):
    from program.stages.selfcheck import ClaimChecker

    strips = [Strip("hunt#0", 0, HUNT)]
    swapped = ClaimChecker()(question="Who was the producer of The Hunt?",
                             answer="The producer of The Hunt was Craig Zobel [1].",
                             strips=strips)
    assert [c.support for c in swapped] == ["no"] and fake_lm.calls["CheckClaimSupport"] == 0
    right = ClaimChecker()(question="Who was the director of The Hunt?",
                           answer="The director of The Hunt was Craig Zobel [1].",
                           strips=strips)
    # not set to "no" by the role check: the overlap verdict stands ("director" is not "directed")
    assert [c.support for c in right] == ["partially"]
