"""LongBench Pro (caskcsg/LongBench-Pro): 25 secondary tasks over natural English and Chinese documents of 8K-256K
tokens, with the official prompt and metrics.

catalog.py names the tasks, their metrics and the six length levels, items.py reads the official records and builds
the official prompt, metrics.py is the official scoring, task.py the `longbenchpro/<task>` tasks (importing the
package registers them).
"""
