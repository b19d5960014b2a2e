"""OpenAI GraphWalks: BFS and parents over a directed graph's edge list, scored by set F1 on the last line.

task.py registers `graphwalks/bfs` and `graphwalks/parents`; items.py reads the official files; grading.py holds the
graders (the dataset card's, lm-evaluation-harness's strict and flexible ones).
"""
