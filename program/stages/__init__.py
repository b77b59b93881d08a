"""The CRAG stages (Yan et al. 2024) with Self-RAG's checks (Asai et al. 2023), one file each.

``crag`` is the Module whose ``forward`` is the paper's algorithm; it calls, in order: the
instruction set-aside (``instructions``), the retrieval evaluator (``evaluator``, §4.2–4.3), the
stale-source check (``stale``), the web path for INCORRECT and AMBIGUOUS (``web_path``, §4.3),
decompose-then-recompose (``refine``, §4.4), generation (``generation``), the claim-level
self-check (``selfcheck``, Self-RAG's IsSup), usefulness (``usefulness``, IsUse) and citations
(``attribution``). ``baselines`` holds what CRAG is measured against: plain RAG and LangGraph's
CRAG tutorial, with the same LM and result type.
"""
