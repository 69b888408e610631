#!/usr/bin/env bash
# Session 62: explore144 (the bf16 GEMM: persistent, TMA descriptors), then the matmul suite (the tf32 launcher's
# transposing copies by Triton since 8f4f79a).
set -u
source baselines/lease.sh
timeout 320 python3 baselines/h200/s62/explore144.py "$OUT/explore144.jsonl" 2>&1 | grep -v Warn | grep -v '"kind": "time"' | cut -c1-300 | tail -8
python3 - "$OUT/explore144.jsonl" <<'PY'
import json, sys
best = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["kind"] == "time":
        k = (r["dtype"], r["site"], tuple(r["shape"]), r["impl"])
        if k not in best or r["median_us"] < best[k][0]:
            best[k] = (r["median_us"], r.get("config"), r["rel_err"] and round(r["rel_err"], 5))
for k, v in best.items():
    print(*k, *v)
PY
timeout 250 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error' | tail -30
