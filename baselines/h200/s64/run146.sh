#!/usr/bin/env bash
# Session 64, second call (run in session 65 on an H100: baselines/h100/s65/): run147.sh (the matmul launcher through
# TMA descriptors, 84cc84c brought back, opt-in, against cuBLAS and the pointer kernel, then the matmul suite with
# it), then issue 8's missed points at HEAD (run145.sh).
set -u
start=$(date +%s)
source baselines/h200/s64/run147.sh
unset BENCH_MATMUL_TMA
source baselines/h200/s64/run145.sh
echo "all: $(( $(date +%s) - start )) s"
