#!/usr/bin/env bash
# Session 57: backward on the calling thread (new) against autograd's worker thread (old: mt.patch reversed), the
# e2e points' bwd rows on one machine; first ncu on backward cases, by their NVTX range.
set -u
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $gpu in *H100*) DIR=baselines/h100 ;; *H200*) DIR=baselines/h200 ;; *) echo "card: $gpu"; exit 4 ;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export BENCH_CACHE_DIR=/tmp/cal PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt"
PYTHONPATH=/tmp/site:$PWD python3 - "$DIR/calibration.json" <<'PY'
import json, os, sys
from bench import roofline
from bench.results import device_name, environment
(entry,) = json.load(open(sys.argv[1])).values()
env = environment("cuda")
os.makedirs("/tmp/cal", exist_ok=True)
json.dump({roofline.cache_key(device_name(env, "cuda"), env.get("driver")): entry}, open("/tmp/cal/calibration.json", "w"))
PY
rm -rf /tmp/old && cp -r "$PWD" /tmp/old && (cd /tmp/old && patch -s -p1 -R < .whlrun2/mt.patch) || exit 5
grep -c backward_on_this_thread /tmp/old/bench/execute.py bench/execute.py
ab() {  # ab TREE FILE SHA
  (cd "$1" && PYTHONPATH=/tmp/site:$1 BENCH_GIT_SHA=$3 python3 -m bench.cli run e2e --suites .whlrun2/e2e.yaml \
     --mode bwd --component rmsnorm --impl triton --impl builtin --no-report --out "$OUT/$2" 2>&1 | tail -2)
}
t0=$(date +%s); ab /tmp/old old-1.jsonl 5d73c69; ab "$PWD" new-1.jsonl $SHA; echo "A/B: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site:$PWD
python3 -m bench.cli compare "$OUT/old-1.jsonl" "$OUT/new-1.jsonl" --all > "$OUT/compare-ab.txt" 2>&1; tail -30 "$OUT/compare-ab.txt"
