#!/usr/bin/env bash
# Session 64 (run in session 65 on an H100, through run146.sh: baselines/h100/s65/): the matmul launcher through TMA
# descriptors (84cc84c brought back, opt-in by BENCH_MATMUL_TMA=1) against cuBLAS and the pointer kernel (explore144
# --brief: `library` is the TMA launcher here), then the matmul suite with it, every row checked against float64 and
# timed beside cuBLAS (eager); `bench compare` it against baselines/h100/s64/matmul.jsonl (the pointer launcher) on an
# H100.
set -u
source baselines/lease.sh
export BENCH_MATMUL_TMA=1
t0=$(date +%s)
timeout 100 python3 baselines/h200/s62/explore144.py "$OUT/explore144-brief.jsonl" --brief 2>&1 | grep -v Warn \
  | grep -v '"kind": "time"' | cut -c1-300 | tail -5
python3 - "$OUT/explore144-brief.jsonl" <<'PY'
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if r["kind"] != "env":
        print(r["kind"], r["dtype"], r["site"], r["shape"], r["impl"], r.get("median_us"), r.get("rel_err"), r.get("error", ""))
PY
echo "explore: $(( $(date +%s) - t0 )) s"
timeout 210 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error|Error' | tail -52
echo "matmul: $(( $(date +%s) - t0 )) s"
