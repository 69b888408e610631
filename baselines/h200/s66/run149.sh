#!/usr/bin/env bash
# Session 66 (not run: no machine was lent): on an H200, issue 8's missed points at HEAD first (run145.sh); on any
# card, the matmul suite with descriptors by default against the card's last matmul rows (run148.sh; on an H200 its
# rows should replace baselines/h200/matmul.jsonl), then explore149 (small bf16 tiles at 1024^3, tf32 without the
# K-major copy) in the time left of a 600 s call. SKIP_NORMS=1 leaves out the first part on an H200.
set -u
source baselines/lease.sh
begun=$(date +%s)
if [ "$DIR" = baselines/h200 ] && [ -z "${SKIP_NORMS:-}" ]; then source baselines/h200/s64/run145.sh; fi
ONLY_MATMUL=1 source baselines/h200/s65/run148.sh
left=$(( 560 - ($(date +%s) - begun) ))
if [ "$left" -gt 60 ]; then
  timeout "$left" python3 baselines/h200/s66/explore149.py "$OUT/explore149.jsonl" 2>&1 | grep -v Warn | tail -5
  python3 - "$OUT/explore149.jsonl" <<'PY'
import json, sys
for r in map(json.loads, open(sys.argv[1])):
    if r.get("kind") in ("time", "fail"):
        print(r["dtype"], r["site"], "x".join(map(str, r["shape"])), r["impl"], r.get("layout", ""), r.get("config", ""),
              r.get("median_us", r.get("error", "")))
PY
else
  echo "explore149: no time left ($left s)"
fi
echo "run149: $(( $(date +%s) - begun )) s"
