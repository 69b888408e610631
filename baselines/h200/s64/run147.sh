#!/usr/bin/env bash
# Session 64, the last of its device time: the matmul suite with the TMA launcher (84cc84c brought back), every row
# checked against float64 and timed beside cuBLAS (eager).
set -u
source baselines/lease.sh
t0=$(date +%s)
timeout 210 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E '^│|error|Error' | tail -52
echo "matmul: $(( $(date +%s) - t0 )) s"
