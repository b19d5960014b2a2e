"""ctxbench harness: run loop, backends, results store and CLI."""

__version__ = "0.1.0"
