#!/usr/bin/env bash
# Session 58: the lease set-up (baselines/lease.sh, bench calibrate --use), then bench trace of multi-rank cases on
# one GPU: the kernel table without the ranges' projections, a memory snapshot per rank, a collective.
set -u
source baselines/lease.sh
echo "DIR $DIR"; ls -la /tmp/cal; python3 -c "import json; d=json.load(open('/tmp/cal/calibration.json')); print(list(d), d[list(d)[0]]['mem_bw'])"
P=config=small,batch=4,seq=512,world_size=1,bucket_mb=25
t0=$(date +%s)
python3 -m bench.cli trace --component data_parallel --impl ddp --point $P --dtype bf16 --calls 3 --out /tmp/tr \
  > "$OUT/trace-ddp.txt" 2>&1; echo "trace rc $? $(( $(date +%s) - t0 )) s"; cut -c1-160 "$OUT/trace-ddp.txt" | head -34
t0=$(date +%s)
python3 -m bench.cli trace --component data_parallel --impl fsdp2 --point $P --dtype bf16 --calls 2 --memory --out /tmp/mem \
  > "$OUT/memory.txt" 2>&1; echo "memory rc $? $(( $(date +%s) - t0 )) s"; cat "$OUT/memory.txt" | cut -c1-200; ls -la /tmp/mem
t0=$(date +%s)
python3 -m bench.cli trace --component collectives --impl torch --point op=all_reduce,mb=256,world_size=1 --dtype bf16 \
  --calls 3 --out /tmp/tr > "$OUT/trace-coll.txt" 2>&1; echo "coll rc $? $(( $(date +%s) - t0 )) s"; cut -c1-160 "$OUT/trace-coll.txt" | head -20
python3 -m bench.cli trace --component collectives --impl torch --point op=all_reduce,mb=256,world_size=2 --dtype bf16 \
  --device cuda 2>&1 | tail -2
