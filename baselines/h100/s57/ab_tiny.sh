#!/usr/bin/env bash
# Session 57: backward on the calling thread (new) against autograd's worker thread (old: mt.patch reversed), the
# e2e points' bwd rows on one machine; first ncu on backward cases, by their NVTX range.
set -u
source baselines/lease.sh
rm -rf /tmp/old && cp -r "$PWD" /tmp/old && (cd /tmp/old && patch -s -p1 -R < .whlrun2/mt.patch) || exit 5
grep -c backward_on_this_thread /tmp/old/bench/execute.py bench/execute.py
ab() {  # ab TREE FILE SHA
  (cd "$1" && PYTHONPATH=/tmp/site:$1 BENCH_GIT_SHA=$3 python3 -m bench.cli run e2e --suites .whlrun2/e2e.yaml \
     --mode bwd --component rmsnorm --impl triton --impl builtin --no-report --out "$OUT/$2" 2>&1 | tail -2)
}
t0=$(date +%s); ab /tmp/old old-1.jsonl 5d73c69; ab "$PWD" new-1.jsonl $SHA; echo "A/B: $(( $(date +%s) - t0 )) s"
export PYTHONPATH=/tmp/site:$PWD
python3 -m bench.cli compare "$OUT/old-1.jsonl" "$OUT/new-1.jsonl" --all > "$OUT/compare-ab.txt" 2>&1; tail -30 "$OUT/compare-ab.txt"
