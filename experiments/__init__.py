"""Studies and benchmarks beside the program: retrieval recall and speed, judge transfer across
domains, embedding probes, sentence splitters, a cross-encoder judge, LM calibration and the
service's load. Each is a command (``python -m experiments.<name>``) that reads the program and
the compile, never the other way round; ``docs/lab/`` holds their write-ups."""
