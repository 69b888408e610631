#!/usr/bin/env bash
# Session 57: ncu on a backward case by its NVTX range, after backward_on_this_thread.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 BENCH_CACHE_DIR=/tmp/cal
nvidia-smi --query-gpu=uuid,name --format=csv,noheader
python3 -m bench.cli trace e2e --suites .whlrun2/e2e.yaml --component rmsnorm --impl triton --point tokens=4096,dim=4096 \
  --dtype bf16 --mode bwd --mode fwd_bwd --ncu 2>&1 | tee "$OUT/ncu.txt" | grep -v "^\[" | cut -c1-200
