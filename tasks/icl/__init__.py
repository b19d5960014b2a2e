"""Many-shot in-context classification as SPLICE evaluates it (`icl/trec`, `icl/dbpedia`): task.py.

HELMET's ICL tasks (`icl/banking77`, ...) follow HELMET's protocol and live in tasks/helmet/icl.py.
"""
