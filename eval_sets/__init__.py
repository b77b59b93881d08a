"""Evaluation data: the hand-labeled adversarial set (``eval_sets.adversarial``) and PopQA (``eval_sets/popqa``)."""
