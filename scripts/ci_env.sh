# Sourced by scripts/test.sh. Under CI=true, a test that needs an outside resource CI provides fails instead of skipping
# (tests/conftest.py `missing`): `transformers serve` always (setup.sh test installs the serve extra), ../shared/data
# (or $CTXBENCH_DATA_DIR) only where it is there, since a fresh clone has no data of its own. A value already set wins.
if [ "${CI:-}" = "true" ]; then
  export CTXBENCH_REQUIRE_SERVE="${CTXBENCH_REQUIRE_SERVE:-1}"
  ci_data_dir="${CTXBENCH_DATA_DIR:-$PWD/../shared/data}"
  if [ -d "$ci_data_dir/pg_essays" ]; then
    export CTXBENCH_REQUIRE_DATA="${CTXBENCH_REQUIRE_DATA:-1}"
  else
    echo "CI: no test data at $ci_data_dir; the tests that need it skip (CTXBENCH_REQUIRE_DATA is not set)" >&2
  fi
fi
