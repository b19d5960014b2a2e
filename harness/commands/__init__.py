"""CLI command groups. Each module defines register(app); harness.cli loads them all."""
