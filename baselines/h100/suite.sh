#!/usr/bin/env bash
# Session 51: the whole bf16 norms suite, every implementation, on one H100 (the lent machines gave H100s to calls
# for an H200 for three sessions running). The H200 run's script (baselines/h200/s45/suite.sh) with this card's own
# ceilings: part 1 calibrates (`bench calibrate`, kept as calibration.json / calibrate.txt), part 2 reuses them
# under its machine's driver, so every row is judged against the same ceilings. Each part fits one 10-minute call:
#   PART=1 OUT=... SHA=... bash baselines/h100/suite.sh   (1: every forward, then rmsnorm's bwd and fwd_bwd;
#                                                          2: layernorm's and softmax's bwd and fwd_bwd)
# Rows a cut-short part returned go under DIR (default baselines/h100) first; `--resume` skips them.
# Exits 4 at once on a card that is not an H100.
set -u
DIR=${DIR:-baselines/h100}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $gpu in *H100*) ;; *) echo "not an H100: $gpu"; exit 4 ;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=$SHA
nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv \
  > "$OUT/smi-$PART.txt"
if [ -f "$DIR/calibration.json" ]; then  # the committed ceilings, keyed to this machine's driver
  python3 -m bench.cli calibrate --device cuda --use "$DIR/calibration.json" > /dev/null || exit 3
else
  python3 -m bench.cli calibrate --device cuda 2>&1 | tee "$OUT/calibrate.txt" | grep -v "│"
  cp /tmp/cal/calibration.json "$OUT/calibration.json"
fi
run() {  # run FILE ARGS...: the norms suite's cases (bf16, or DTYPE) selected by ARGS into OUT/FILE, resumed
  local file=$1; shift
  [ -f "$DIR/$file" ] && cp "$DIR/$file" "$OUT/$file"
  python3 -m bench.cli run norms --dtype "${DTYPE:-bf16}" --no-report --resume --out "$OUT/$file" "$@"
}
case $PART in
  1) run fwd.jsonl --mode fwd
     run rmsnorm-bwd.jsonl --component rmsnorm --mode bwd --mode fwd_bwd ;;
  2) run rest-bwd.jsonl --component layernorm --component softmax --mode bwd --mode fwd_bwd ;;
  ln) run layernorm-fwd.jsonl --component layernorm --mode fwd --mode fwd_bwd ;;  # after _passes_chunk (session 51)
  ln32) DTYPE=fp32 run layernorm-fp32.jsonl --component layernorm ;;  # the fp32 corner set (session 52)
esac
