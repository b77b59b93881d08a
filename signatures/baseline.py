"""The LangGraph CRAG tutorial's two judgments, for the ``langgraph`` baseline (``program.stages.baselines``).

The popular CRAG recipe (LangGraph's "langgraph_crag" tutorial) grades each retrieved document
with one binary relevance question and rewrites the question for web search when any
document fails it. These are its prompts as DSPy Signatures, close to the tutorial's wording;
they are not compiled, so the baseline runs the recipe as users build it.
"""

import dspy


class GradeDocumentBinary(dspy.Signature):
    """You are a grader assessing relevance of a retrieved document to a user question.

    Given a user question and a retrieved document, is the document relevant to the question?
    If the document contains keyword(s) or semantic meaning related to the question, grade it
    as relevant. Give a binary score yes or no."""

    question: str = dspy.InputField()
    document: str = dspy.InputField(desc="one retrieved document")
    relevant: bool = dspy.OutputField(desc="yes if the document is relevant to the question, else no")


class RewriteForWebSearch(dspy.Signature):
    """You are a question re-writer that converts an input question to a better version optimized for web search.

    Look at the input and try to reason about the underlying semantic intent / meaning."""

    question: str = dspy.InputField(desc="the initial question")
    query: str = dspy.OutputField(desc="the improved question for a web search engine")
