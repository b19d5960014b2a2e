"""An example ctxbench plugin (see plugin.py and the docs' "Extending ctxbench" page)."""
