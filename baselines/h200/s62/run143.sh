#!/usr/bin/env bash
# Session 62: the launcher with Triton's transposing copies, in session 61's explore141 (the kernel before session
# 61 / the launcher / cuBLAS at the matmul suite's points), then the matmul suite.
set -u
source baselines/lease.sh
timeout 260 python3 baselines/h200/s61/explore141.py "$OUT/explore141.jsonl" 2>&1 | grep -v Warn | grep -v '"kind": "time"' | tail -3
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
timeout 280 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error' | tail -30
