#!/usr/bin/env bash
# The README's test command: install, lint, then run the default test tiers (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
python3 -m ruff check --quiet .
exec python3 -m pytest -q "$@"
