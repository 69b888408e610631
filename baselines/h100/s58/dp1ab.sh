#!/usr/bin/env bash
# Session 58: is the step faster with its backward on the calling thread? One process (mt_step.py), then bench run
# of ddp at the small LM, new / old / new / old (old: the one line reverted).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=$SHA PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt"
python3 - baselines/h100/calibration.json <<'PY'
import json, os, sys
from bench import roofline
from bench.results import device_name, environment
(entry,) = json.load(open(sys.argv[1])).values()
env = environment("cuda")
os.makedirs("/tmp/cal", exist_ok=True)
json.dump({roofline.cache_key(device_name(env, "cuda"), env.get("driver")): entry}, open("/tmp/cal/calibration.json", "w"))
PY
python3 .whlrun2/mt_step.py small 2>&1 | tee "$OUT/mt_step.txt" | tail -12
cp impls/data_parallel.py /tmp/new.py
sed 's/        with named("backward"), backward_on_this_thread():  # inside its range, for nsys and ncu/        with named("backward"):/' /tmp/new.py > /tmp/old.py
for vr in new1 old1 new2 old2; do
  v=${vr%?}
  cp /tmp/$v.py impls/data_parallel.py
  python3 -m bench.cli run dp1-ab --suites .whlrun2/dp1.yaml --impl ddp --no-report --point-timeout 150 \
    --out "$OUT/ab-$vr.jsonl" 2>&1 | grep "^\[" | cut -c1-160
done
cp /tmp/new.py impls/data_parallel.py
python3 - "$OUT"/ab-*.jsonl <<'PY'
import json, sys
for f in sys.argv[1:]:
    for r in map(json.loads, open(f)):
        print(f.split("/")[-1], r["impl"], r["status"], round(r["median_ms"], 2), round(r["cpu_ms"], 2), r.get("samples"), r.get("stopped_by"))
PY
