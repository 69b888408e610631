"""`bench compare BASELINE CURRENT`: which rows got slower, faster, or broke.

Rows are matched on (component, impl, mode, point, dtype, device). For a pair that ran on both sides the
median ratio current/baseline gets a 95% bootstrap confidence interval and a
Mann-Whitney U test on the samples. A row is `slower`/`faster` only when the ratio moves beyond the threshold
*and* the change is significant; `noisy` when the interval is too wide to rule a threshold-sized change in or
out; else `same`. ok -> mismatch/error/oom/timeout is `broken`, always a failure; `slower` fails too unless the
caller gates on correctness alone (FAIL_ON["broken"], for machines whose timing cannot be trusted). No torch here.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
from scipy import stats

from bench.results import KEY, load, point_label

FAILING = ("slower", "broken")
# what fails a comparison: a slower row or a correctness loss, or (on a machine whose timing cannot be trusted,
# such as a shared 2-core CI runner, where identical code has read 5.4x slower in the second of two runs) only a
# correctness loss; slower rows are listed either way
FAIL_ON = {"slower": FAILING, "broken": ("broken",)}


@dataclass
class Verdict:
    component: str
    impl: str
    mode: str
    point: str
    dtype: str
    device: str
    verdict: str  # slower | faster | same | noisy | broken | fixed | new | missing | not-timed
    base_ms: float | None = None
    cur_ms: float | None = None
    ratio: float | None = None
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    p_value: float | None = None
    base_status: str | None = None
    cur_status: str | None = None
    note: str = ""


def _last(df: pd.DataFrame) -> pd.DataFrame:
    """One row per key: the last one written (a resumed or repeated run may hold several)."""
    return df.drop_duplicates(subset=KEY, keep="last").set_index(KEY)


BOOT_CONFIDENCE = 0.95
BOOT_RESAMPLES = 1000
BOOT_MAX_SAMPLES = 500  # longer sample lists are thinned (evenly) before resampling: same CI, bounded cost


def ratio_ci(b: np.ndarray, c: np.ndarray, confidence: float) -> tuple[float, float]:
    """Percentile bootstrap interval of median(c) / median(b); seeded, so the same files give the same verdict."""
    rng = np.random.default_rng(12345)
    thin = lambda x: x[np.linspace(0, len(x) - 1, BOOT_MAX_SAMPLES).astype(int)] if len(x) > BOOT_MAX_SAMPLES else x
    b, c = thin(np.sort(b)), thin(np.sort(c))
    mb = np.median(rng.choice(b, (BOOT_RESAMPLES, len(b))), axis=1)
    mc = np.median(rng.choice(c, (BOOT_RESAMPLES, len(c))), axis=1)
    r = mc / mb
    q = (1 - confidence) / 2
    return float(np.quantile(r, q)), float(np.quantile(r, 1 - q))


def judge_pair(base: list[float], cur: list[float], threshold: float, alpha: float) -> tuple[str, dict]:
    """Verdict on two sample sets of one case."""
    b, c = np.asarray(base, dtype=float), np.asarray(cur, dtype=float)
    mb, mc = float(np.median(b)), float(np.median(c))
    ratio = mc / mb
    lo, hi = ratio_ci(b, c, BOOT_CONFIDENCE)
    p = float(stats.mannwhitneyu(base, cur, alternative="two-sided").pvalue) if min(len(base), len(cur)) >= 3 else 1.0
    info = {"base_ms": mb, "cur_ms": mc, "ratio": ratio, "ratio_lo": lo, "ratio_hi": hi, "p_value": p}
    if ratio > 1 + threshold and p < alpha and lo > 1:
        return "slower", info
    if ratio < 1 - threshold and p < alpha and hi < 1:
        return "faster", info
    if hi > 1 + threshold or lo < 1 - threshold:
        return "noisy", info  # the interval reaches past the threshold: too wide to call it either way
    return "same", info


def _settings(config: str) -> dict[str, str]:
    """"ROWS=4 STAGES=3 warps=8" -> {"ROWS": "4", "STAGES": "3", "warps": "8"}."""
    return dict(part.split("=", 1) for part in config.split() if "=" in part)


def config_change(base: object, cur: object) -> str:
    """What the autotuner chose differently for a case, from the rows' `kernel_configs`: "autotuner:
    _kernel warps 4->8" per kernel that ran on both sides, only the settings that differ (one present on a side
    only, a newly added option, counts where it is on: not False or 0); "" when nothing did."""
    base = base if isinstance(base, dict) else {}
    cur = cur if isinstance(cur, dict) else {}
    changes = []
    for kernel in sorted(set(base) & set(cur)):
        b, c = _settings(base[kernel]), _settings(cur[kernel])
        moved = [f"{k} {b.get(k, 'none')}->{c.get(k, 'none')}" for k in sorted(set(b) | set(c))
                 if b.get(k) != c.get(k) and (k in b and k in c or (b.get(k) or c.get(k)) not in ("False", "0"))]
        if moved:
            changes.append(f"{kernel} " + ", ".join(moved))
    return "autotuner: " + "; ".join(changes) if changes else ""


PROBE_NOTE_MIN = 0.02  # a copy probe that moved less than this between the runs goes unmentioned


def _probe_us(row) -> float | None:
    env = row.get("env")
    probe = env.get("copy_probe") if isinstance(env, dict) else None
    us = probe.get("us") if isinstance(probe, dict) else None
    return float(us) if isinstance(us, (int, float)) and us > 0 else None


def probe_change(base, cur) -> str:
    """"copy probe 18.9->20.4 us (+8%)" for a memory-bound row whose two runs' copy probes (calibrate.copy_probe)
    differ by PROBE_NOTE_MIN or more: a machine of the same model can read its memory-bound rows that much
    slower or faster with no change of code; "" otherwise."""
    if cur.get("bound") != "memory":
        return ""
    b, c = _probe_us(base), _probe_us(cur)
    if b is None or c is None or abs(c / b - 1) < PROBE_NOTE_MIN:
        return ""
    return f"copy probe {b:.3g}->{c:.3g} us ({c / b - 1:+.0%})"


def _flush(row) -> str:
    """The L2 flush a row was timed after: its `l2_flush` ("reset": claim, demote, zero; "zero"), "zero" for a
    flushed row from before rows recorded it (session 44), "none" for an unflushed one (CPU rows, --no-flush)."""
    flushed = row.get("l2_flushed")
    if not isinstance(flushed, (bool, np.bool_)) or not flushed:
        return "none"
    method = row.get("l2_flush")
    return method if isinstance(method, str) and method else "zero"


def flush_change(base, cur) -> str:
    """"L2 flush zero->reset" where the two rows were timed after different flushes: zeroing alone left lines
    loaded with evict_last in L2, so a point then read faster when such a kernel had run on its inputs before
    (bench/timing.py, _L2Flusher); "" otherwise."""
    b, c = _flush(base), _flush(cur)
    return "" if b == c else f"L2 flush {b}->{c}"


def timer_change(base, cur) -> str:
    """"timer cuda_graph->cuda_event" where the two rows name different timers: on an H200 a CUDA-graph
    difference read 1.8-2.7 us less than events around the same call (bench/timing.py, TimingConfig.cuda_graph),
    so a short call can move that much with no change of code; "" otherwise, or where a side does not say."""
    b, c = base.get("timer"), cur.get("timer")
    return f"timer {b}->{c}" if isinstance(b, str) and isinstance(c, str) and b != c else ""


def compare_frames(base: pd.DataFrame, cur: pd.DataFrame, threshold: float = 0.05, alpha: float = 0.01,
                   across_devices: bool = False) -> list[Verdict]:
    """Verdicts of the rows of `cur` against those of `base` (as results.load gives them); `across_devices` matches
    one machine's rows against another's (one_device)."""
    if across_devices:
        base, cur = one_device(base, cur)
    b, c = _last(base), _last(cur)
    out: list[Verdict] = []
    for key in list(c.index) + [k for k in b.index if k not in c.index]:
        comp, impl, mode, pk, dtype, device = key
        v = Verdict(comp, impl, mode, pk, dtype, device, "same")
        if key not in b.index:
            v.verdict, v.cur_status = "new", c.loc[key, "status"]
            out.append(v)
            continue
        if key not in c.index:
            v.verdict, v.base_status = "missing", b.loc[key, "status"]
            out.append(v)
            continue
        br, cr = b.loc[key], c.loc[key]
        v.base_status, v.cur_status = br["status"], cr["status"]
        if br["status"] == "ok" and cr["status"] != "ok":
            v.verdict, v.note = "broken", f"{cr['status']}: {cr.get('reason') or ''}"[:200]
        elif br["status"] != "ok" and cr["status"] == "ok":
            v.verdict, v.note = "fixed", f"was {br['status']}"
        elif br["status"] != "ok":
            v.verdict, v.note = "same", f"{cr['status']} on both sides"
        else:
            bs, cs = br.get("samples_ms"), cr.get("samples_ms")
            if not isinstance(bs, list) or not isinstance(cs, list) or not bs or not cs:
                v.verdict, v.note = "not-timed", "no samples on one side (e.g. Triton under the CPU interpreter)"
            elif min(np.median(bs), np.median(cs)) <= 0:  # no timer gives this; a file edited by hand may
                v.verdict, v.note = "not-timed", "a median of 0 ms or less on one side: no ratio to judge"
            else:
                v.verdict, info = judge_pair(bs, cs, threshold, alpha)
                for k, val in info.items():
                    setattr(v, k, val)
                notes = (config_change(br.get("kernel_configs"), cr.get("kernel_configs")), probe_change(br, cr),
                         flush_change(br, cr), timer_change(br, cr))
                v.note = "; ".join(n for n in notes if n)
        out.append(v)
    return out


def compare_files(baseline: list[str], current: list[str], threshold: float = 0.05, alpha: float = 0.01,
                  across_devices: bool = False) -> list[Verdict]:
    return compare_frames(load(baseline), load(current), threshold, alpha, across_devices)


class AcrossDevicesError(ValueError):
    """--across-devices asked of a side that holds rows of several devices."""


def one_device(base: pd.DataFrame, cur: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rows of two machines (an H100 run against an H200 baseline) matched on all but the device, which reads
    `BASE -> CURRENT` in every verdict. AcrossDevicesError unless each side holds rows of one device."""
    devices = [sorted(set(df["device"].dropna())) for df in (base, cur)]
    for side, held in zip(("the baseline holds", "the current results hold"), devices):
        if len(held) != 1:
            raise AcrossDevicesError(f"--across-devices matches one device against one; {side} {', '.join(held)}")
    label = f"{devices[0][0]} -> {devices[1][0]}"
    return base.assign(device=label), cur.assign(device=label)


def devices_matched(verdicts: list[Verdict], across_devices: bool) -> str | None:
    """`BASE -> CURRENT` where the verdicts matched two machines' rows (one_device names it in each), else None."""
    return verdicts[0].device if across_devices and verdicts else None


def nothing_in_common(verdicts: list[Verdict], devices_hint: str = "") -> str | None:
    """Why no case is on both sides, or None where one is: a gate that compared nothing has passed nothing.
    `devices_hint` follows the reason where the sides ran on different devices."""
    if any(v.verdict not in ("new", "missing") for v in verdicts):
        return None
    base = sorted({v.device for v in verdicts if v.verdict == "missing"})
    cur = sorted({v.device for v in verdicts if v.verdict == "new"})
    if base != cur:
        return f"the baseline ran on {', '.join(base)}; the current results on {', '.join(cur)}{devices_hint}"
    return "they share no component, implementation, mode, point and dtype"


def failed(verdicts: list[Verdict], failing: tuple[str, ...] = FAILING) -> bool:
    return any(v.verdict in failing for v in verdicts)


def row_cells(v: Verdict) -> list[str]:
    """A verdict as the cells of a report's row, under HEADER."""
    ratio = f"{v.ratio:.3f} [{v.ratio_lo:.3f}, {v.ratio_hi:.3f}]" if v.ratio is not None else "-"
    ms = lambda x: f"{x:.4g}" if x is not None and not (isinstance(x, float) and math.isnan(x)) else "-"
    p = f"{v.p_value:.2g}" if v.p_value is not None else "-"
    return [v.verdict, f"{v.component}:{v.impl}", v.mode, point_label(v.point), v.dtype, ms(v.base_ms), ms(v.cur_ms),
            ratio, p, v.note]


HEADER = ["verdict", "case", "mode", "point", "dtype", "base ms", "current ms", "ratio [CI]", "p", "note"]
ORDER = {"broken": 0, "slower": 1, "noisy": 2, "faster": 3, "fixed": 4, "missing": 5, "new": 6, "same": 7,
         "not-timed": 8}


def counts(verdicts: list[Verdict]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in verdicts:
        out[v.verdict] = out.get(v.verdict, 0) + 1
    return out


# verdicts a report lists only when asked for every row: unchanged ones, and cases of the baseline that did not
# run (a partial run, `--component softmax` against a whole suite, would bury its verdicts under hundreds)
UNLISTED = ("same", "not-timed", "missing")


def listed(verdicts: list[Verdict], show_all: bool = False) -> list[Verdict]:
    """The verdicts a report lists, in ORDER: those that changed, or with show_all every one."""
    ordered = sorted(verdicts, key=lambda v: ORDER.get(v.verdict, 9))
    return [v for v in ordered if show_all or v.verdict not in UNLISTED]


def unlisted_missing(verdicts: list[Verdict], show_all: bool = False) -> str:
    """The line that stands for the missing rows listed() leaves out: "" when there are none, or they are listed."""
    n = counts(verdicts).get("missing", 0)
    return "" if show_all or not n else f"{n} cases of the baseline are not in the current results (--all lists them)"


def markdown(verdicts: list[Verdict], threshold: float, alpha: float, failing: tuple[str, ...] = FAILING,
             show_all: bool = False) -> str:
    c = counts(verdicts)
    head = "**Regression** :x:" if failed(verdicts, failing) else "**No regression** :white_check_mark:"
    gate = "" if "slower" in failing else ", timing not gated"
    lines = [f"{head} (threshold {threshold:.0%}, alpha {alpha}{gate}): " + ", ".join(f"{n} {k}" for k, n in sorted(c.items(), key=lambda kv: ORDER.get(kv[0], 9))), ""]
    shown = listed(verdicts, show_all)
    missing = unlisted_missing(verdicts, show_all)
    if missing:
        lines += [missing, ""]
    if shown:
        lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        for v in shown:
            lines.append("| " + " | ".join(s.replace("|", "\\|") for s in row_cells(v)) + " |")
    return "\n".join(lines) + "\n"


def as_json(verdicts: list[Verdict], failing: tuple[str, ...] = FAILING) -> str:
    return json.dumps({"failed": failed(verdicts, failing), "counts": counts(verdicts),
                       "rows": [asdict(v) for v in verdicts]}, indent=2, default=lambda x: None)
