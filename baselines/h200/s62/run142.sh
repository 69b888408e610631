#!/usr/bin/env bash
# Session 62: explore142 (the tf32 GEMM's time taken apart: copies, kernel, configs), then the matmul suite.
set -u
source baselines/lease.sh
timeout 280 python3 baselines/h200/s62/explore142.py "$OUT/explore142.jsonl" 2>&1 | grep -v Warn | grep -v '"kind": "time"' | tail -12
python3 - "$OUT/explore142.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        print(r["shape"], r["site"], r["impl"], r.get("tile") or r.get("config") or "", r["median_us"], r["rel_err"] and round(r["rel_err"], 5))
PY
timeout 270 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error' | tail -30
