"""Adapting to one knowledge base at index time, from its own documents (ARES §3): the rows it
gives of itself (``synthetic_rows``, ``lm_questions``), the judges fitted on them beside the labeled
pairs the compile saved (``labeled``, ``pairs``, ``fit``, ``calibrate``), all of it in ``adapt``."""
