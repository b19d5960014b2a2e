"""User-facing errors: one line, naming the field and the fix; the CLI prints them without a traceback."""

EXIT_USAGE = 2  # bad input: a one-line error, nothing written
EXIT_FAILED = 3  # the run finished, but some samples ended in error (rerun to retry them)
EXIT_INTERRUPTED = 130  # Ctrl-C (rerun to resume)


class CtxbenchError(Exception):
    """An error caused by the user's input or environment, not by a bug in ctxbench."""


class ConfigError(CtxbenchError):
    """A config key or value is wrong."""


class OfflineError(CtxbenchError):
    """Something must be downloaded, but the machine is offline."""


class PromptTooLongError(CtxbenchError):
    """A prompt does not fit the model's context and no truncation policy allows cutting it."""
