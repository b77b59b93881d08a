"""Run-time guards around one question: the question's own checks (``question``: not empty,
within the length cap, printable), the caps on work (``caps``: seconds, tokens, LM calls, web
pages, strips, claims) and per-step cost accounting (``cost``), which every stage runs under.
The step events that observe the stages from outside are the application's (``program.app.tracing``).
"""
