#!/usr/bin/env bash
# The README's test command: install, lint, build the docs, then run the default test tiers (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
python3 -m ruff check --quiet .
# The docs build strictly (a broken link, a missing page or a failing generated page fails the tests); into a temp
# dir, so the tree is left as it was.
docs_out=$(mktemp -d)
trap 'rm -rf "$docs_out"' EXIT
NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true python3 -m mkdocs build --strict -q -d "$docs_out"
python3 -m pytest -q "$@"
