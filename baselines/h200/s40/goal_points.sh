#!/usr/bin/env bash
# Session 40: on a lent H200, session 36's lease probe (../s36/lease.py); when the machine is fast by session 29's
# measure, issue 8's 16M-element bf16 goal points of the norms suite, with IMPLS (default: triton builtin), under
# the committed calibration. Run from the repository root on the GPU machine: bash baselines/h200/s40/goal_points.sh
# (OUT: where results go; SHA: the commit; IMPLS optional; FORCE=1 runs the points on a slow machine too).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=$SHA
nvidia-smi --query-gpu=uuid,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt"
python3 baselines/h200/s36/lease.py "$OUT/lease.json" /tmp/cal; rc=$?
[ $rc = 4 ] && exit 4  # not an H200
[ $rc = 0 ] || [ "${FORCE:-0}" = 1 ] || exit 0
impls=""; for i in ${IMPLS:-triton builtin}; do impls="$impls --impl $i"; done
r="python3 -m bench.cli run norms --dtype bf16 --no-report --out $OUT/goal.jsonl $impls"
for shape in "4096 4096" "1024 16384"; do
  set -- $shape
  $r --component rmsnorm --component layernorm --mode fwd --mode bwd --where tokens=$1 --where dim=$2
done
for shape in "4096 4096" "1024 16384" "256 65536" "64 262144"; do
  set -- $shape
  $r --component softmax --mode fwd --where rows=$1 --where dim=$2
done
python3 baselines/h200/s31/goal_table.py "$OUT/goal.jsonl" > "$OUT/goal_table.txt"; cat "$OUT/goal_table.txt"
