#!/usr/bin/env bash
# Session 65 (not run: no machine started): the matmul suite at HEAD with the GEMM through TMA descriptors by default
# (no switch set), `bench compare`d against the card's last matmul rows; on an H200, then issue 8's missed points at
# HEAD (run145.sh) unless ONLY_MATMUL is set. On an H200 its matmul rows should replace baselines/h200/matmul.jsonl.
set -u
[ -n "${DIR:-}" ] || source baselines/lease.sh
start=$(date +%s)
python3 -c "import kernels.matmul as k; print('kernels.matmul.TMA:', k.TMA)"
timeout 200 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E 'error|Error' | tail -5
echo "matmul: $(( $(date +%s) - start )) s"
case $DIR in */h100) base=$DIR/s65/matmul.jsonl ;; *) base=$DIR/matmul.jsonl ;; esac
python3 -m bench.cli compare "$base" "$OUT/matmul.jsonl" --all --format markdown > "$OUT/compare-matmul.md" 2>&1
echo "compare rc $?"; head -3 "$OUT/compare-matmul.md"; grep triton "$OUT/compare-matmul.md" | cut -c1-160
if [ "$DIR" = baselines/h200 ] && [ -z "${ONLY_MATMUL:-}" ]; then source baselines/h200/s64/run145.sh; fi
echo "all: $(( $(date +%s) - start )) s"
