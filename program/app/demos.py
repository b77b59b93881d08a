"""Few-shot demos that belong to the knowledge base in use.

The compile picks the reader's demos from every training domain. A demo's answer is text a
1.5B reader copies: the help centre's "You have 7 calendar days from the day the dispute is
opened..." came back, word for word, as the handbook's answer to "How quickly do I have to
report a security incident?" (greedy drafts of the handbook's training questions). A demo
whose passages the knowledge base does not hold teaches the format at the price of that
leak, so it is left out there: a few-shot demo (DSPy's ``BootstrapFewShot``, Khattab et al.
2023) is an example of the task on the data it will meet.
"""

from __future__ import annotations

from program.text import coverage

# A demo strip counts as held when this share of its content words stands in one passage.
HELD = 0.8
SEARCH_K = 3


def holds(knowledge_base, text: str) -> bool:
    """True when one of the ``knowledge_base``'s top ``SEARCH_K`` passages for ``text`` writes at
    least ``HELD`` of its content words (no LM call; a search that fails holds nothing)."""
    try:
        passages = knowledge_base.search(text, SEARCH_K)
    except Exception:  # a demo is a help, never a reason to fail loading
        return False
    return any(coverage(text, p.text) >= HELD for p in passages)


def demo_strips(demo) -> list[str]:
    """The passage texts of one demo's ``context`` (``["[1] text", ...]`` or one string), without
    their ``[n]`` numbers."""
    context = demo.get("context") if hasattr(demo, "get") else getattr(demo, "context", None)
    if not context:
        return []
    entries = context if isinstance(context, list) else [context]
    return [str(e).split("] ", 1)[1] if str(e).startswith("[") and "] " in str(e) else str(e) for e in entries]


def demos_for(knowledge_base, demos: list) -> list:
    """``demos`` whose every passage ``knowledge_base`` holds (``holds``), in order.

    A demo without a context (nothing to leak from a passage) is kept; with no knowledge base
    (``None``) every demo is kept.
    """
    if knowledge_base is None:
        return list(demos)
    return [d for d in demos if all(holds(knowledge_base, s) for s in demo_strips(d))]
