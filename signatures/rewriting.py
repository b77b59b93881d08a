"""Query rewriting for the web path (CRAG §4.3, knowledge searching)."""

import dspy


class RewriteQuery(dspy.Signature):
    """Rewrite the question as a short search query in the vocabulary the documents use.

    Guess the terms an expert source (an encyclopedia, the product's documentation) would use
    for what the user means: the entity's full name, expanded acronyms, the technical term
    instead of the everyday phrasing. Return at most a dozen keywords, no question words."""

    question: str = dspy.InputField()
    query: str = dspy.OutputField(desc="keywords for a search engine")
