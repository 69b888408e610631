#!/usr/bin/env bash
# Session 60: explore139 (every GEMM config alone at tf32 against cuBLAS), on whichever card comes.
set -u
source baselines/lease.sh
t0=$(date +%s)
python3 baselines/h100/s59/explore139.py "$OUT/explore139.jsonl" 2>&1 | tail -5
echo "explore139: $(( $(date +%s) - t0 )) s"
python3 - "$OUT/explore139.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    if r["kind"] != "env":
        print(r.get("round"), r.get("shape"), r.get("impl", r["kind"]), r.get("config"), r.get("median_us"), r.get("error", "")[:60])
PY
python3 baselines/h200/s60/pop_check.py 2>&1 | tail -4
