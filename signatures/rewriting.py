"""Query rewriting for the web path (CRAG §4.3, knowledge searching)."""

import dspy


class RewriteQuery(dspy.Signature):
    """Rewrite the question as a short search query in the vocabulary the documents use.

    The candidate terms are words, phrases and headings the knowledge base itself uses, the
    ones nearest to the question first. Build the query from the candidates that mean what the
    user means (the documents' name for the thing asked about), skip candidates about something
    else, and add the entity's full name from the question. When no candidate fits, use the
    terms an expert source (an encyclopedia, the product's documentation) would use: expanded
    acronyms, the technical term instead of the everyday phrasing. Return at most a dozen
    keywords, no question words."""

    question: str = dspy.InputField()
    candidate_terms: list[str] = dspy.InputField(desc="terms the knowledge base uses, nearest to the question first")
    query: str = dspy.OutputField(desc="keywords for a search engine")
