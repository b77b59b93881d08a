"""Grading signatures: the retrieval evaluator and the knowledge-strip filter (CRAG §4.2, §4.4).

Neither asks the model for a score or a category: asked for those, the small local model
(Qwen2.5-Coder-1.5B) answered "irrelevant" or "no" to nearly everything. GradeRetrieval asks
for yes/no judgments on a passage, which do separate relevant from irrelevant passages
(``program.evaluator.score_grade`` turns them into a score); StripRelevance shows the model
the numbered strips of one question at once and asks it to copy the answer out of each strip
that states it, which it does well (one call per question, not per strip); each copy is checked
against its strip (``program.refine.score_spans``).
"""

import dspy


class GradeRetrieval(dspy.Signature):
    """Read the passage and decide whether it answers the question about this exact entity.

    same_entity: the passage is about the person, place or thing the question names (the same
    full name and the same kind of thing, not a namesake). answers_question: the passage states
    the fact the question asks for. outdated: the passage says it describes a deprecated,
    archived or superseded version."""

    question: str = dspy.InputField()
    passage: str = dspy.InputField(desc="one retrieved passage")
    same_entity: bool = dspy.OutputField(desc="is the passage about the entity the question names?")
    answers_question: bool = dspy.OutputField(desc="does the passage state the asked fact?")
    outdated: bool = dspy.OutputField(desc="does the passage say it is deprecated or outdated?")


class StripRelevance(dspy.Signature):
    """Copy from the numbered knowledge strips the words that answer the question about this exact entity: the name, place, job, sport or genre asked for.

    Write one line per strip that states the answer: its number in brackets, then the words
    copied from it. Leave out strips about another entity or without the answer. If no strip
    answers, write NONE."""

    question: str = dspy.InputField()
    strips: list[str] = dspy.InputField(desc="numbered knowledge strips, sentences from retrieved documents")
    # a string, parsed by program.refine.score_spans: a typed list fails to parse whenever the
    # small model writes bare strip numbers ([1, 3]), which it does about once in seven
    answer_spans: str = dspy.OutputField(desc="one line per answering strip: [n] then the words copied from strip n; or NONE")
