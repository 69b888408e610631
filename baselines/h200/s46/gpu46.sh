set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whlrun2/*.whl
export PYTHONPATH=/tmp/site:$PWD BENCH_CACHE_DIR=/tmp/cal BENCH_GIT_SHA=46ff07f
nvidia-smi --query-gpu=uuid,clocks.sm,clocks.mem,driver_version --format=csv > $OUT/smi-2.txt
python3 baselines/h200/s36/lease.py $OUT/lease.json /tmp/cal; echo lease rc=$?
python3 baselines/h200/s46/launch_floor.py $OUT/launch_floor.json
r="python3 -m bench.cli run norms --dtype bf16 --no-report --out $OUT/graph3.jsonl --impl builtin --mode fwd"
$r --component rmsnorm --where tokens=4096 --where dim=768
$r --component layernorm --where tokens=1024 --where dim=4096
$r --component softmax --where rows=4096 --where dim=768
python3 -c "
import json
for l in open('$OUT/graph3.jsonl'):
    r=json.loads(l); print(r['component'], r['point'], r['timer'], round(r['median_ms']*1e3,2), r['status'])"
