#!/usr/bin/env bash
# Session 61: explore141 (the launcher as committed against before, tf32 and bf16), then the matmul suite.
set -u
source baselines/lease.sh
timeout 200 python3 baselines/h200/s61/explore141.py "$OUT/explore141.jsonl" 2>&1 | grep -v Warn | tail -3
python3 - "$OUT/explore141.jsonl" <<'PY'
import json, sys
from collections import defaultdict
got = defaultdict(dict)
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        got[(r["dtype"], tuple(r["shape"]), r["site"])][r["impl"]] = (r["median_us"], r["rel_err"] and round(r["rel_err"], 5))
for k, v in got.items():
    print(*k, v)
PY
timeout 200 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error' | tail -30
