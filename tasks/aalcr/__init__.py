"""AA-LCR (Artificial Analysis Long Context Reasoning): multi-document reasoning questions over real document sets,
checked by an LLM judge.

items.py reads the official questions and documents and builds the official prompt, verdicts.py is the official
equality-check prompt and the verdict's reading, task.py the `aalcr` task (importing the package registers it).
"""
