#!/usr/bin/env bash
<<<<<<< HEAD
# Session 65, second call: the matmul suite at HEAD with the GEMM through TMA descriptors by default (no switch set;
# 64-row and 64-column tiles offered to its autotuner too), `bench compare`d against the card's last matmul rows; on
# an H200, then issue 8's missed points at HEAD (run145.sh) unless ONLY_MATMUL is set.
=======
# Session 65, second call: the matmul suite at HEAD with the GEMM through TMA descriptors by default (no switch set),
# `bench compare`d against the card's last matmul rows; on an H200, then issue 8's missed points at HEAD (run145.sh).
>>>>>>> parent of 6cea140 (kernels/matmul: the TMA kernel's autotuner offered 64 x 128 and 128 x 64 tiles (1024^3: 128 programs, not 64 of 132 SMs))
set -u
source baselines/lease.sh
start=$(date +%s)
python3 -c "import kernels.matmul as k; print('kernels.matmul.TMA:', k.TMA)"
timeout 200 python3 -m bench.cli run matmul --out "$OUT/matmul.jsonl" --no-report 2>&1 | grep -E 'error|Error' | tail -5
echo "matmul: $(( $(date +%s) - start )) s"
case $DIR in */h100) base=$DIR/s65/matmul.jsonl ;; *) base=$DIR/matmul.jsonl ;; esac
python3 -m bench.cli compare "$base" "$OUT/matmul.jsonl" --all --format markdown > "$OUT/compare-matmul.md" 2>&1
echo "compare rc $?"; head -3 "$OUT/compare-matmul.md"; grep triton "$OUT/compare-matmul.md" | cut -c1-160
if [ "$DIR" = baselines/h200 ] && [ -z "${ONLY_MATMUL:-}" ]; then source baselines/h200/s64/run145.sh; fi
echo "all: $(( $(date +%s) - start )) s"
