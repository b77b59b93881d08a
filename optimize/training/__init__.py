"""The compile's training of the judges: labeled pairs from eval_sets/ (``pairs``, ``sources``) and
the trained judges with their dev figures (``train``). Fitting and calibrating are
``program.adaptation``'s, which ``program index`` uses too."""
