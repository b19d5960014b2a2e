"""`--backend` help that names the registered backends, plugins' included, read from the registry when the help is
shown: loading every backend module (and plugin) on each start would cost every command."""

from __future__ import annotations

from typer.core import TyperCommand


class BackendHelpCommand(TyperCommand):
    """A command whose `--backend` option's help ends with the registered backends' names."""

    def format_help(self, ctx, formatter) -> None:
        from ctxbench.harness.core import registry

        for param in self.params:
            if param.name == "backend" and param.help:
                base = getattr(param, "static_help", param.help)
                param.static_help = base  # type: ignore[attr-defined]  # idempotent: help shown twice in one process
                param.help = f"{base}; registered: {', '.join(registry.names('backend'))}"
        return super().format_help(ctx, formatter)
