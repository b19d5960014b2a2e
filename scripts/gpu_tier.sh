#!/usr/bin/env bash
# The gpu test tier on a lent device machine (see tests/gpu/conftest.py). Prepared here, run there:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux_2_17_x86_64 -d .whl transformers==5.24.0 pydantic pydantic-core annotated-types \
#     typing-inspection typing_extensions wonderwords==3.0.1 peft==0.21.2
#   python3 -c "from ctxbench.harness.core.models import load_tokenizer as l; l('smollm2-135m').save_pretrained('.whl/tok')"
#   cp -r ../shared/data .whl/data
# then, on the device, with .whl carried: bash scripts/gpu_tier.sh   (writes $OUT/gpu.log when OUT is set)
# What skips there: tests/gpu/test_ring_attention_cuda.py needs 2 GPUs (the lent machines have one); the tiled_mlp
# cases of tests/gpu/test_memory_plan_cuda.py need deepspeed, which ships as a source package only (not carried).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/ctx/ctxbench
for d in harness tasks trainers leaderboard configs; do ln -sfn "$PWD/$d" /tmp/ctx/ctxbench/$d; done
touch /tmp/ctx/ctxbench/__init__.py
export PYTHONPATH=/tmp/site:/tmp/ctx PYTHONUNBUFFERED=1
export CTXBENCH_GPU_TOKENIZER=$PWD/.whl/tok CTXBENCH_DATA_DIR=$PWD/.whl/data
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
log=${OUT:-/tmp}/gpu.log
python3 -m pytest -m gpu tests/gpu -q -p no:cacheprovider -o addopts="" --durations=10 -rA 2>&1 | tee "$log"
