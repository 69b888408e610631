"""Session 59: why do calls of a few microseconds read 2-8% slower after the reset flush (claim with evict_last,
demote to evict_normal, zero) than after zeroing alone (H200, sessions 45-46, explore125-129)? Not the time after
the flush (500 us changed nothing), not the reset's last zeroing (one more zeroing after it read the same or
slower). Two candidates: the priority operations (the claim's evict_last loads, the demotion), or only that the
reset does more work before each sample (its claim reads the whole buffer): the card's clocks or power could
answer to that, where L2 state would not.

One process times, through bench.timing with events (cuda_graph="never"), explore128's five calls (the library's
forwards and copies, bf16) under seven flushes of the one buffer, two rounds:
  zero          buf.zero_()                       (nvbench's and do_bench's)
  reset         claim, demote, zero               (the library's)
  zero+zero     zeroed twice                       more work, no priority operation
  read+zero     a plain read of buf, then zero    the claim's traffic without evict_last
  claim+zero    claim (evict_last), then zero     no demotion
  demote+zero   demote, then zero                 no claim
  zero+demote   zero, then demote
While each call is timed a thread polls NVML every 2 ms: the SM clock (min, mean) and the power draw (mean).

Run from the repository root: python3 baselines/h100/s59/explore136.py OUT.jsonl [--137]   (on a GPU)
                              TRITON_INTERPRET=1 python3 baselines/h100/s59/explore136.py --smoke   (CPU: the flushes without PTX, the calls)
"""
from __future__ import annotations

import os
import sys
import threading
import time

import torch

ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "baselines", "h200", "s40"))
sys.path.insert(0, os.path.join(ROOT, "baselines", "h200", "s46"))

from _explore import begin, emit  # noqa: E402
from explore128 import calls  # noqa: E402

from bench import timing  # noqa: E402
from bench.timing import TimingConfig, l2_flusher, time_call  # noqa: E402
from kernels.l2 import LINE, _claim_kernel, _demote_kernel  # noqa: E402

ROUNDS = 2
MODES = ["zero", "reset", "zero+zero", "read+zero", "claim+zero", "demote+zero", "zero+demote"]
if "--137" in sys.argv:  # the second run: the read's effect, taken apart
    MODES = ["zero", "read+zero", "read+zero+zero", "read+zero*3", "reset", "reset+zero", "readother+zero",
             "readhalf1+zero", "readhalf2+zero"]


def claim(buf):
    n = buf.numel()
    _claim_kernel[((n + 4095) // 4096,)](buf, n, BLOCK=4096)


def demote(buf):
    n_lines = buf.numel() * 4 // LINE
    _demote_kernel[((n_lines + 1023) // 1024,)](buf, n_lines, LINES=1024, INTS_PER_LINE=LINE // 4)


OTHER = {}  # a second buffer of the flush buffer's size (read+zero of another buffer)


def other(b):
    if "buf" not in OTHER:
        OTHER["buf"] = torch.ones_like(b)
    return OTHER["buf"]


STEPS = {
    "zero": lambda b, sink: b.zero_(),
    "reset": lambda b, sink: (claim(b), demote(b), b.zero_()),
    "zero+zero": lambda b, sink: (b.zero_(), b.zero_()),
    "read+zero": lambda b, sink: (sink.copy_(b.sum(dtype=torch.int64)), b.zero_()),
    "claim+zero": lambda b, sink: (claim(b), b.zero_()),
    "demote+zero": lambda b, sink: (demote(b), b.zero_()),
    "zero+demote": lambda b, sink: (b.zero_(), demote(b)),
    # explore137: does the read's effect outlast more zeroings; is it the buffer read, or any read before?
    "read+zero+zero": lambda b, sink: (sink.copy_(b.sum(dtype=torch.int64)), b.zero_(), b.zero_()),
    "read+zero*3": lambda b, sink: (sink.copy_(b.sum(dtype=torch.int64)), b.zero_(), b.zero_(), b.zero_()),
    "reset+zero": lambda b, sink: (claim(b), demote(b), b.zero_(), b.zero_()),
    "readother+zero": lambda b, sink: (sink.copy_(other(b).sum(dtype=torch.int64)), b.zero_()),
    "readhalf1+zero": lambda b, sink: (sink.copy_(b[: b.numel() // 2].sum(dtype=torch.int64)), b.zero_()),
    "readhalf2+zero": lambda b, sink: (sink.copy_(b[b.numel() // 2:].sum(dtype=torch.int64)), b.zero_()),
}


class Flush:
    """The library's flusher's buffer, flushed as `mode`."""

    def __init__(self, inner):
        self.inner, self.mode, self.method = inner, "reset", "reset"
        self.sink = torch.zeros((), dtype=torch.int64, device=inner.buf.device)

    def __call__(self):
        STEPS[self.mode](self.inner.buf, self.sink)


class Poll:
    """NVML's SM clock (MHz) and power (W) every 2 ms while open."""

    def __init__(self):
        self.clocks, self.watts, self.stop = [], [], threading.Event()
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml, self.handle = pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)
        except Exception:  # no NVML here: times only
            self.nvml = None

    def run(self):
        while self.nvml is not None and not self.stop.is_set():
            self.clocks.append(self.nvml.nvmlDeviceGetClockInfo(self.handle, self.nvml.NVML_CLOCK_SM))
            self.watts.append(self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1e3)
            time.sleep(0.002)

    def __enter__(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def fields(self) -> dict:
        c, w = self.clocks or [0], self.watts or [0.0]
        return {"sm_mhz_min": min(c), "sm_mhz_mean": round(sum(c) / len(c)), "watts_mean": round(sum(w) / len(w)),
                "watts_max": round(max(w)), "polls": len(self.clocks)}


def main() -> None:
    smoke = "--smoke" in sys.argv
    path = None if smoke else next(a for a in sys.argv[1:] if not a.startswith("--"))
    out, dev = begin(path, smoke)
    timed = calls(dev, smoke)
    if smoke:
        buf = torch.zeros(4096, dtype=torch.int32)
        sink = torch.zeros((), dtype=torch.int64)
        for mode in MODES:
            if "demote" not in mode and not mode.startswith("reset"):  # inline PTX: not in the interpreter
                STEPS[mode](buf, sink)
        for fn in timed.values():
            fn()
        print("smoke: every flush and call ran")
        return
    device = torch.cuda.current_device()
    inner = l2_flusher(device)
    flush = Flush(inner)
    timing._FLUSHERS[device] = flush
    cfg = TimingConfig(cuda_graph="never", max_time_s=2.0)
    for fn in timed.values():
        fn()
    for rnd in range(ROUNDS):
        for mode in MODES:
            flush.mode = mode
            for name, fn in timed.items():
                with Poll() as poll:
                    s = time_call(fn, dev, cfg).summary()
                emit(out, kind="time", round=rnd, flush=mode, call=name, median_us=round(s["median_ms"] * 1e3, 3),
                     n=s["n"], **poll.fields())
    timing._FLUSHERS[device] = inner


if __name__ == "__main__":
    main()
