#!/usr/bin/env bash
# Session 62, with about 240 s of device time left: explore144 --micro (the bf16 forward through TMA descriptors,
# one program an SM, against the launcher and cuBLAS).
set -u
source baselines/lease.sh
timeout 150 python3 baselines/h200/s62/explore144.py "$OUT/explore144.jsonl" --micro 2>&1 | grep -v Warn | cut -c1-240 | tail -16
