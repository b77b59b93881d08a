"""The corpus loader's error, apart so that the loader and its converters share it without a circle."""


class CorpusError(ValueError):
    """The corpus cannot be loaded; the message says which file (and line) and why."""
