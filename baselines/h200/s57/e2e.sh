#!/usr/bin/env bash
# Session 57: the four ways the tool is used, on the lent GPU at HEAD: run (a few norms points, every impl), compare
# against the card's committed baseline, trace (torch.profiler + ncu) one point, and the quick suite.
set -u
source baselines/lease.sh
t0=$(date +%s)
python3 -m bench.cli run e2e --suites .whlrun2/e2e.yaml --no-report --out "$OUT/e2e.jsonl" 2>&1 | grep -v "━" | tail -30
echo "run: $(( $(date +%s) - t0 )) s"
python3 - "$DIR/norms.jsonl" "$OUT/e2e.jsonl" > /tmp/base.jsonl <<'PY'
import json, sys
ran = {(r["component"], json.dumps(r["point"], sort_keys=True)) for r in map(json.loads, open(sys.argv[2]))}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["dtype"] == "bf16" and (r["component"], json.dumps(r["point"], sort_keys=True)) in ran:
        print(line, end="")
PY
echo "baseline rows: $(wc -l < /tmp/base.jsonl)"
python3 -m bench.cli compare /tmp/base.jsonl "$OUT/e2e.jsonl" --all > "$OUT/compare.txt" 2>&1; echo "compare rc $?"
python3 -m bench.cli compare /tmp/base.jsonl "$OUT/e2e.jsonl" --all --format markdown >> "$OUT/compare.txt" 2>&1
head -90 "$OUT/compare.txt"
python3 -m bench.cli trace e2e --suites .whlrun2/e2e.yaml --component rmsnorm --impl triton --impl compile \
  --point tokens=4096,dim=4096 --dtype bf16 --mode bwd --ncu --out "$OUT/trace" > "$OUT/trace.txt" 2>&1; echo "ncu rc $?"
python3 -m bench.cli trace e2e --suites .whlrun2/e2e.yaml --component rmsnorm --impl triton \
  --point tokens=4096,dim=4096 --dtype bf16 --mode fwd_bwd --out "$OUT/trace" >> "$OUT/trace.txt" 2>&1; echo "trace rc $?"; cat "$OUT/trace.txt" | cut -c1-200 | head -80
ls -la "$OUT/trace"
t0=$(date +%s)
python3 -m bench.cli run quick --no-report --out "$OUT/quick.jsonl" 2>&1 | tail -5
echo "quick: $(( $(date +%s) - t0 )) s"
