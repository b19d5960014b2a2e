#!/usr/bin/env bash
# The README's test command: install, lint, build the docs, then run the default test tiers (unit + integration) on
# two workers.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
python3 -m ruff check --quiet .
# The docs build strictly (a broken link, a missing page or a failing generated page fails the tests); into a temp
# dir, so the tree is left as it was.
docs_out=$(mktemp -d)
trap 'rm -rf "$docs_out"' EXIT
NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true python3 -m mkdocs build --strict -q -d "$docs_out"
# Two xdist workers (the tests that share a checkout build or a server run on one: tests/conftest.py's xdist groups);
# CTXBENCH_TEST_WORKERS=0 runs them serially, and arguments after the script's name go to pytest last.
source scripts/ci_env.sh
# One BLAS/OpenMP thread per worker (and per process a test starts): two workers on two cores each spinning two
# threads ran the numpy- and torch-heavy tests at a half or a third of their speed (a null-rate test: 26.5 user-s
# against 12.0 beside one busy process). A value already set wins; a backend's own `threads` still sets torch's.
if [ "${CTXBENCH_TEST_WORKERS:-2}" != "0" ]; then
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" OPENBLAS_NUM_THREADS="${OPENBLAS_NUM_THREADS:-1}" \
    MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
fi
python3 -m pytest -q -n "${CTXBENCH_TEST_WORKERS:-2}" --dist loadgroup "$@"
