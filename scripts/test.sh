#!/usr/bin/env bash
# The README's test command: install, then run the default test tiers (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec python3 -m pytest -q "$@"
