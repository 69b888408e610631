#!/usr/bin/env bash
# Session 62, with little device time left: explore144 --brief (cuBLAS, the launcher through TMA, the pointer kernel),
# then the matmul suite.
set -u
source baselines/lease.sh
timeout 150 python3 baselines/h200/s62/explore144.py "$OUT/explore144.jsonl" --brief 2>&1 | grep -v Warn | grep -E '"kind": "(fail|env)"' | cut -c1-300 | tail -5
python3 - "$OUT/explore144.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        print(r["dtype"], r["site"], r["shape"], r["impl"], r["median_us"], r["rel_err"] and round(r["rel_err"], 5))
PY
timeout 170 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error' | tail -30
