"""RULER v2 (NeMo-Skills chsieh/ruler2): 12 tasks, multi-key NIAH, multi-value NIAH and QA at four levels each
(basic, easy, medium, hard), generated at any length; registered in presets.py, scored in metrics.py."""
