#!/usr/bin/env bash
# Session 60: explore139 (every GEMM config alone at tf32 against cuBLAS), on whichever card comes.
set -u
source baselines/lease.sh
python3 baselines/h200/s60/pop_check.py 2>&1 | tail -4
t0=$(date +%s)
timeout ${EXPLORE_S:-400} python3 baselines/h100/s59/explore139.py "$OUT/explore139.jsonl" 2>&1 | tail -5
echo "explore139: $(( $(date +%s) - t0 )) s"
python3 - "$OUT/explore139.jsonl" <<'PY'
import json, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1])]
best = defaultdict(list)
for r in rows:
    if r["kind"] == "fail":
        print("fail", r["shape"], r["layout"], r["config"], r["error"][:50])
    elif r["kind"] == "time":
        best[(tuple(r["shape"]), r.get("layout", "cublas"))].append((r["median_us"], r.get("config"), r["round"], r.get("library")))
for key, got in best.items():
    got.sort()
    print(key, "best:", got[:4], "library's best:", [g for g in got if g[3]][:1])
PY
