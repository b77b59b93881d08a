"""Grading signatures: the retrieval evaluator and the knowledge-strip filter (CRAG §4.2, §4.4).

Neither asks the model for a score or a category: asked for those, the small local model
(Qwen2.5-Coder-1.5B) answered "irrelevant" or "no" to nearly everything. GradeRetrieval asks
for yes/no judgments on a passage, which do separate relevant from irrelevant passages
(``program.stages.evaluator.score_grade`` turns them into a score); StripRelevance shows the model
one strip and asks it to copy the answer out of it, or NONE; the copy is checked against the
strip (``program.stages.refine.score_span``). One call per strip: shown all strips of a question at
once, the 1.5B model copied something out of nearly every row, relevant or not (11 of the 12
dev rows without an answering strip), and CRAG's accuracy on the adversarial dev questions
fell from 55 % to 25 %.
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
    """Copy from the knowledge strip the words that answer the question about this exact entity: the name, place, job, sport or genre asked for. If the strip is about another entity or does not contain the answer, write NONE."""

    question: str = dspy.InputField()
    strip: str = dspy.InputField(desc="one knowledge strip, a sentence from a retrieved document")
    answer_span: str = dspy.OutputField(desc="words copied from the strip, or NONE")
