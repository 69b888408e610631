#!/usr/bin/env bash
# Session 58: the backward on autograd's worker thread with the call's ranges carried there (HEAD, "mirror"),
# against the calling thread (session 57's way, .whlrun2/calling.patch) and the worker thread without them ("plain").
set -u
source baselines/lease.sh
rm -rf /tmp/calling /tmp/plain && cp -r "$PWD" /tmp/calling && cp -r "$PWD" /tmp/plain || exit 5
(cd /tmp/calling && patch -s -p1 < .whlrun2/calling.patch) || exit 6
sed -i 's/        with named("backward"), backward_in_ranges(\[loss\]):/        with named("backward"):/' /tmp/plain/impls/data_parallel.py
grep -c "backward_on_this_thread" /tmp/calling/bench/execute.py; grep -n 'named("backward")' /tmp/plain/impls/data_parallel.py
export PYTHONPATH=/tmp/site:$PWD
t0=$(date +%s)
python3 -m bench.cli trace e2e --suites .whlrun2/e2e.yaml --component rmsnorm --impl triton --point tokens=4096,dim=4096 \
  --dtype bf16 --mode bwd --mode fwd_bwd --ncu > "$OUT/ncu-norm.txt" 2>&1; echo "ncu norm rc $? $(( $(date +%s) - t0 )) s"
grep -v "^\[" "$OUT/ncu-norm.txt" | cut -c1-200 | tail -14
t0=$(date +%s)
python3 -m bench.cli trace --component data_parallel --impl ddp --point config=tiny-tied,batch=2,seq=16,world_size=1,bucket_mb=1 \
  --dtype fp32 --ncu > /tmp/ncu.txt 2>&1; echo "ncu ddp rc $? $(( $(date +%s) - t0 )) s"
grep "  kernel: " /tmp/ncu.txt | sort | uniq -c | sort -rn > "$OUT/ncu-ddp.txt"
echo "kernels $(grep -c '  kernel: ' /tmp/ncu.txt), backward-named $(grep -ci backward "$OUT/ncu-ddp.txt")"
grep -v "  kernel: " /tmp/ncu.txt | tail -5 | cut -c1-200
norms() {  # TREE FILE
  (cd "$1" && PYTHONPATH=/tmp/site:$1 BENCH_GIT_SHA=$SHA python3 -m bench.cli run e2e --suites .whlrun2/e2e.yaml \
     --mode bwd --component rmsnorm --impl triton --impl builtin --no-report --out "$OUT/$2" 2>&1 | grep "^\[" | cut -c1-150)
}
step() {  # TREE FILE
  (cd "$1" && PYTHONPATH=/tmp/site:$1 BENCH_GIT_SHA=$SHA python3 -m bench.cli run dp1-ab --suites .whlrun2/dp1.yaml \
     --impl ddp --no-report --point-timeout 150 --out "/tmp/$2" 2>&1 | grep "^\[" | cut -c1-150)
}
t0=$(date +%s); norms /tmp/calling norms-calling.jsonl; norms "$PWD" norms-mirror.jsonl; echo "norms: $(( $(date +%s) - t0 )) s"
t0=$(date +%s)
for v in mirror1 plain1 calling1 mirror2 plain2; do
  case $v in mirror*) tree=$PWD ;; *) tree=/tmp/${v%?} ;; esac
  step $tree step-$v.jsonl
done
echo "steps: $(( $(date +%s) - t0 )) s"
cat /tmp/step-*.jsonl > "$OUT/steps.jsonl"
python3 -m bench.cli compare "$OUT/norms-calling.jsonl" "$OUT/norms-mirror.jsonl" --all 2>&1 | tail -8
python3 - "$OUT/norms-calling.jsonl" "$OUT/norms-mirror.jsonl" /tmp/step-*.jsonl <<'PY'
import json, sys
for f in sys.argv[1:]:
    for r in map(json.loads, open(f)):
        print(f.split("/")[-1], r["component"], r["impl"], r["point"], r["status"], round(r["median_ms"] * 1e3, 2), "us",
              "cpu", round(r["cpu_ms"], 3), "ms", r.get("stopped_by"))
PY
