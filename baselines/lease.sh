# Sourced by the scripts that ran on a lent GPU (baselines/*/s*/*.sh), from the repository's root: the card's
# folder here (DIR; exits 4 on a card that has none), the wheels that machine lacks (.whlrun2/, carried with the
# call), the environment, the card's clocks in $OUT/smi.txt, and the card's committed ceilings, so that its rows
# are judged against the baseline's roofline.
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader)
case $gpu in *H100*) DIR=baselines/h100 ;; *H200*) DIR=baselines/h200 ;; *) echo "card: $gpu"; exit 4 ;; esac
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=${SHA:-} PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.mem,clocks.max.sm,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt"
python3 -m bench.cli calibrate --device cuda --use "$DIR/calibration.json" > /dev/null || exit 3
