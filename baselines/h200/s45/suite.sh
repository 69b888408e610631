#!/usr/bin/env bash
# Session 45: the whole bf16 norms suite, every implementation, under the L2 flush of session 44 (kernels/l2.py),
# in two parts that each fit one 10-minute device call. Run from the repository root on the GPU machine:
#   PART=1 OUT=... SHA=... bash baselines/h200/s45/suite.sh   (1: every forward, then rmsnorm's bwd and fwd_bwd;
#                                                              2: layernorm's and softmax's bwd and fwd_bwd)
# A part cut short continues where it stopped: put the rows it returned under DIR (default baselines/h200/s45/)
# first (the same file names); they are copied into OUT and `--resume` skips them. Session 47 reran it with
# DIR=baselines/h200/s47.
set -u
DIR=${DIR:-baselines/h200/s45}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=$SHA
nvidia-smi --query-gpu=uuid,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  > "$OUT/smi-$PART.txt"
python3 baselines/h200/s36/lease.py "$OUT/lease-$PART.json" /tmp/cal  # writes the committed calibration; 3: "slow"
[ $? = 4 ] && exit 4  # not an H200: these rows are H200 baselines
run() {  # run FILE ARGS...: the bf16 norms suite's cases selected by ARGS into OUT/FILE, resumed
  local file=$1; shift
  [ -f "$DIR/$file" ] && cp "$DIR/$file" "$OUT/$file"
  python3 -m bench.cli run norms --dtype bf16 --no-report --resume --out "$OUT/$file" "$@"
}
case $PART in
  1) run fwd.jsonl --mode fwd
     run rmsnorm-bwd.jsonl --component rmsnorm --mode bwd --mode fwd_bwd ;;
  2) run rest-bwd.jsonl --component layernorm --component softmax --mode bwd --mode fwd_bwd ;;
esac
