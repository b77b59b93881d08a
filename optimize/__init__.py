"""Compiling and evaluating the CRAG program: ``python -m optimize.compile``, ``python -m optimize.evaluate``, and the
metrics in ``optimize.metrics``."""
