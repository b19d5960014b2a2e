"""The 13 RULER tasks (paper Table 5), registered as presets of four generator families.

Every parameter of a family is a task argument, so a suite can build harder variants
(more keys, more hops, lower alpha) by overriding args.
"""
