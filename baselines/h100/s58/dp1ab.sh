#!/usr/bin/env bash
# Session 58: is the step faster with its backward on the calling thread? One process (mt_step.py), then bench run
# of ddp at the small LM, new / old / new / old (old: the one line reverted).
set -u
source baselines/lease.sh
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
