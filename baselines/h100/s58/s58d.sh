#!/usr/bin/env bash
# Session 58: every rmsnorm implementation's bwd and fwd_bwd rows with the backward's ranges carried to autograd's
# worker thread (torch.compile's compiled backward among them), and ncu of compile's and eager's bwd by range.
set -u
source baselines/lease.sh
t0=$(date +%s)
python3 -m bench.cli run e2e --suites .whlrun2/e2e.yaml --component rmsnorm --mode bwd --mode fwd_bwd --no-report \
  --out "$OUT/rmsnorm-bwd.jsonl" 2>&1 | grep "^\[" | cut -c1-150; echo "run: $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
python3 -m bench.cli trace e2e --suites .whlrun2/e2e.yaml --component rmsnorm --impl compile --impl eager \
  --point tokens=4096,dim=4096 --dtype bf16 --mode bwd --ncu > "$OUT/ncu.txt" 2>&1; echo "ncu rc $? $(( $(date +%s) - t0 )) s"
grep -v "^\[\|^ncu \|--metrics" "$OUT/ncu.txt" | cut -c1-200 | tail -24
