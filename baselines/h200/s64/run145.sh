#!/usr/bin/env bash
# Session 64 (run in session 65 on an H100, through run146.sh: baselines/h100/s65/): issue 8's missed points and their
# neighbours (s57's e2e suite: rmsnorm, layernorm, softmax at 1024 x 16384 and 4096 x 4096, bf16, every
# implementation, fwd / bwd / fwd_bwd) at HEAD, where the backward runs inside the call's NVTX ranges on autograd's
# worker thread (5a9444c, after s57), then `bench compare` against the same rows of the committed norms.jsonl.
set -u
[ -n "${DIR:-}" ] || source baselines/lease.sh
t0=$(date +%s)
timeout 200 python3 -m bench.cli run e2e --suites baselines/h200/s57/e2e.yaml --no-report --out "$OUT/e2e.jsonl" 2>&1 \
  | grep -v "━" | tail -30
echo "run: $(( $(date +%s) - t0 )) s"
python3 - "$DIR/norms.jsonl" "$OUT/e2e.jsonl" > "$OUT/base.jsonl" <<'PY'
import json, sys
ran = {(r["component"], json.dumps(r["point"], sort_keys=True)) for r in map(json.loads, open(sys.argv[2]))}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["dtype"] == "bf16" and (r["component"], json.dumps(r["point"], sort_keys=True)) in ran:
        print(line, end="")
PY
echo "baseline rows: $(wc -l < "$OUT/base.jsonl")"
python3 -m bench.cli compare "$OUT/base.jsonl" "$OUT/e2e.jsonl" --all > "$OUT/compare.txt" 2>&1; echo "compare rc $?"
python3 -m bench.cli compare "$OUT/base.jsonl" "$OUT/e2e.jsonl" --all --format markdown >> "$OUT/compare.txt" 2>&1
head -90 "$OUT/compare.txt"
# ncu of the backward at the missed point (s57's try caught no kernel: the backward ran outside the range; 596b82a)
timeout 100 python3 -m bench.cli trace e2e --suites baselines/h200/s57/e2e.yaml --component rmsnorm --impl triton \
  --impl compile --point tokens=4096,dim=4096 --dtype bf16 --mode bwd --ncu --out "$OUT/trace" > "$OUT/trace.txt" 2>&1
echo "ncu rc $?"; cut -c1-220 "$OUT/trace.txt" | head -60
