#!/usr/bin/env bash
# Session 61: explore140 (the tf32 GEMM with K-major operands against as they come), the matmul suite's tf32 rows
# with the new launcher, session 60's pop_check, and explore139 (every config alone, both layouts) in what time is left.
set -u
source baselines/lease.sh
python3 baselines/h200/s60/pop_check.py 2>&1 | tail -3
timeout 200 python3 baselines/h200/s61/explore140.py "$OUT/explore140.jsonl" 2>&1 | grep -v Warn | tail -3
python3 - "$OUT/explore140.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        print(r["shape"], r["site"], r["impl"], r["median_us"], r["rel_err"])
PY
timeout 220 python3 -m bench.cli run matmul --dtype tf32 --impl eager --impl triton --out "$OUT/matmul-tf32.jsonl" \
  --no-report 2>&1 | grep -E '^│|error' | tail -30
timeout ${EXPLORE_S:-100} python3 baselines/h100/s59/explore139.py "$OUT/explore139.jsonl" > /dev/null 2>&1
python3 - "$OUT/explore139.jsonl" <<'PY'
import json, sys
from collections import defaultdict
best = defaultdict(list)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        best[(tuple(r["shape"]), r.get("layout", "cublas"))].append((r["median_us"], r.get("config")))
for key, got in best.items():
    print(key, sorted(got)[:3])
PY
