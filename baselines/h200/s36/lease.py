"""Session 36: how fast is the H200 this call got? The copy floor at 32 MiB differs between machines of one model
(session 29: 18.4-19.0 us on two leases, 20.0-20.6 on two others), and the goal points of the norms suite move
with it.

Writes OUT.json with the driver, three copy probes (bench.calibrate.copy_probe: 32 MiB into as many, timed as
`bench run` times a case, L2 flushed) and this machine's copy bandwidth as `bench calibrate` measures it (2 GiB,
the 20th-percentile time). Writes CACHE_DIR/calibration.json: the committed H200 calibration
(baselines/h200/calibration.json) under this machine's driver, so `bench run` with BENCH_CACHE_DIR=CACHE_DIR
judges every row against the same ceilings as norms.jsonl. Exits 0 when the probes' median is under FAST_US, else 3;
exits 4 at once, writing nothing, on a card that is not an H200 (a call for nvidia-h200 can get an H100, session 49):
its rows must not be judged by, or committed beside, the H200's.

Run from the repository root: python3 baselines/h200/s36/lease.py OUT.json CACHE_DIR   (on a GPU)
"""
from __future__ import annotations

import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench import roofline  # noqa: E402
from bench.calibrate import CAL_TIMING, _copy_bw, copy_probe  # noqa: E402
from bench.results import device_name, environment  # noqa: E402
from bench.timing import TimingConfig  # noqa: E402

FAST_US = 19.5  # between the fast leases' 18.4-19.0 us and the slow ones' 20.0-20.6 (session 29)
NOT_H200 = 4  # exit status on any other card
COMMITTED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "calibration.json")


def main(out_path: str, cache_dir: str) -> int:
    gpu = torch.cuda.get_device_name()
    if "H200" not in gpu:
        print(f"not an H200: {gpu}", file=sys.stderr)
        return NOT_H200
    env = environment("cuda")
    probes = [copy_probe("cuda", TimingConfig()) for _ in range(3)]
    median_us = statistics.median(p["us"] for p in probes)
    copy_gbps = _copy_bw("cuda", 2 * 2**30, CAL_TIMING) / 1e9
    committed = json.load(open(COMMITTED))
    (entry,) = committed.values()
    key = roofline.cache_key(device_name(env, "cuda"), env.get("driver"))
    os.makedirs(cache_dir, exist_ok=True)
    with open(os.path.join(cache_dir, "calibration.json"), "w") as f:
        json.dump({key: entry}, f)
    fast = median_us < FAST_US
    row = {"gpu": gpu, "driver": env.get("driver"), "probes": probes,
           "probe_median_us": median_us, "copy_2gib_gbps": round(copy_gbps, 1),
           "committed_copy_gbps": round(entry["mem_bw"] / 1e9, 1), "fast": fast, "cache_key": key}
    print(json.dumps(row), flush=True)
    with open(out_path, "w") as f:
        json.dump(row, f, indent=1)
    return 0 if fast else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
