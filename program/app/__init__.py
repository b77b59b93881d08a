"""The application around the CRAG module: the command line (``cli``, with ``startup`` from flags
to a running program), the HTTP service and its page (``service``), the embedded offline
resources (``resources``: the PopQA knowledge base, the web snapshot, the embedder), the
compiled program's persistence (``compiled``: ``load_compiled()`` for apps), the one builder
of a program for an evaluation mode (``factory``), and the step events that observe the stages
as they run (``tracing``: the stream, the page, ``--trace-jsonl``).
"""
