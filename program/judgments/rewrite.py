"""The rewrite: CRAG §4.3's query rewrite, the question in the knowledge base's own words.

An LM judgment only (no trained judge): ``RewriteQuery`` reads the question and the
knowledge-base terms nearest to it and writes the query the correction searches with
(``program.stages.web_path``). The compile optimizes it on the adversarial set's ``rewrite``
rows by what its query retrieves.
"""

from __future__ import annotations

from program.judgments.base import Judgment
from signatures import RewriteQuery

REWRITE = Judgment("rewrite", RewriteQuery, lambda crag: crag.web_searcher.rewrite, "rewrite", candidates=("lm",))
JUDGMENT = REWRITE
