#!/usr/bin/env bash
# Session 58: multi-rank cases on one GPU: bench trace (torch.profiler, ncu) of data_parallel steps, and the
# step's backward on the calling thread (HEAD) against autograd's worker thread (the one line reverted).
set -u
source baselines/lease.sh
P=config=tiny-tied,batch=2,seq=16,world_size=1,bucket_mb=1
ncu_both() {  # $1: tag (NCU=0 skips it)
  [ "${NCU:-1}" = 0 ] && return
  for i in ddp; do
    python3 -m bench.cli trace --component data_parallel --impl $i --point $P --dtype fp32 --ncu --out /tmp/tr \
      > /tmp/ncu.txt 2>&1; echo "ncu $1 $i rc $?"
    grep -c "  kernel: " /tmp/ncu.txt; grep "  kernel: " /tmp/ncu.txt | sort | uniq -c | sort -rn | head -60 > "$OUT/ncu-$1-$i.txt"
    grep -v "  kernel: " /tmp/ncu.txt | tail -12 | cut -c1-220
  done
}
t0=$(date +%s)
python3 -m bench.cli trace --component data_parallel --impl ddp --impl fsdp2 \
  --point config=small,batch=4,seq=512,world_size=1,bucket_mb=25 --dtype bf16 --calls 3 --out /tmp/tr > "$OUT/trace.txt" 2>&1
echo "trace rc $? $(( $(date +%s) - t0 )) s"; cut -c1-200 "$OUT/trace.txt" | head -70; ls -la /tmp/tr
python3 - /tmp/tr <<'PY'
import glob, json, sys
for f in sorted(glob.glob(sys.argv[1] + "/trace-*.json")):
    ev = json.load(open(f))["traceEvents"]
    ranges = [e for e in ev if e.get("cat") == "user_annotation" and e.get("name") in ("backward", "forward", "optimizer")]
    gpu = [e for e in ev if e.get("cat") == "gpu_user_annotation" and e.get("name") in ("backward", "forward", "optimizer")]
    print(f.split("/")[-1][:60], "cpu ranges", len(ranges), "gpu ranges", len(gpu),
          {n: round(sum(e["dur"] for e in gpu if e["name"] == n) / 1e3, 2) for n in ("forward", "backward", "optimizer")})
PY
t0=$(date +%s)
python3 -m bench.cli run dp1-check dp1-ab --suites .whlrun2/dp1.yaml --no-report --point-timeout 150 --out "$OUT/dp1-new.jsonl" 2>&1 | grep -v "━" | tail -22
echo "run new: $(( $(date +%s) - t0 )) s"
t0=$(date +%s); ncu_both new; echo "ncu: $(( $(date +%s) - t0 )) s"
cp impls/data_parallel.py /tmp/dp.py
sed -i 's/        with named("backward"), backward_on_this_thread():  # inside its range, for nsys and ncu/        with named("backward"):/' impls/data_parallel.py
grep -n 'named("backward")' impls/data_parallel.py
t0=$(date +%s)
python3 -m bench.cli run dp1-ab --suites .whlrun2/dp1.yaml --no-report --point-timeout 150 --out "$OUT/dp1-old.jsonl" 2>&1 | grep -v "━" | tail -8
echo "run old: $(( $(date +%s) - t0 )) s"
t0=$(date +%s); ncu_both old; echo "ncu: $(( $(date +%s) - t0 )) s"
cp /tmp/dp.py impls/data_parallel.py
python3 -m bench.cli compare "$OUT/dp1-old.jsonl" "$OUT/dp1-new.jsonl" --all 2>&1 | tail -12
python3 - "$OUT/dp1-old.jsonl" "$OUT/dp1-new.jsonl" <<'PY'
import json, sys
for f in sys.argv[1:]:
    for r in map(json.loads, open(f)):
        print(f.split("/")[-1], r["impl"], r["point"]["config"], r["dtype"], r["status"], r.get("median_ms"), r.get("cpu_ms"),
              r.get("rel_err"), (r.get("reason") or "")[:80])
PY
