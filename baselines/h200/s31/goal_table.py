"""Issue 8's goal table from a norms results file: for each goal point, every implementation's median us / GB/s /
% of the calibrated roofline, and whether Triton meets the goal, under a line with the run's copy probes. The
notes' tables since session 31 come from it.

Points: norm fwd at >= 4M elements (faster than both builtin and compile; >= 85% of bandwidth at >= 16M), norm
bwd at >= 16M (>= 70%), softmax fwd at >= 16M (>= 80%); bf16.

Run from the repository root: python3 baselines/h200/s31/goal_table.py baselines/h200/norms.jsonl
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))

from bench.results import load  # noqa: E402

M = 2**20
IMPLS = ("triton", "compile", "builtin", "eager")
GOALS = [("rmsnorm", "fwd", 4 * M, 85), ("layernorm", "fwd", 4 * M, 85), ("rmsnorm", "bwd", 16 * M, 70),
         ("layernorm", "bwd", 16 * M, 70), ("softmax", "fwd", 16 * M, 80)]


def rows_of(point: dict) -> int:
    return point.get("tokens", point.get("rows"))


def probe_line(df) -> str:
    """The run's copy probes (bench.calibrate.copy_probe: a 32 MiB copy, as the suite times it) as % of the
    calibrated bandwidth: the floor of the 16M-element forwards (the same bytes in, the same out)."""
    probes = [e["copy_probe"] for e in df.env if isinstance(e, dict) and isinstance(e.get("copy_probe"), dict)
              and "gbps" in e["copy_probe"]]
    if not probes:
        return "copy probe: none recorded"
    peak = df.peak_gbps.max()
    us = sorted(p["us"] for p in probes)
    pct = sorted(100 * p["gbps"] / peak for p in probes)
    return (f"copy probe ({probes[0]['mib']} MiB into as many, the floor of a 16M-element bf16 forward): "
            f"{us[0]:.2f}-{us[-1]:.2f} us, {pct[0]:.1f}-{pct[-1]:.1f}% of the calibrated {peak:,.0f} GB/s")


def table(path: str) -> str:
    df = load([path])
    df = df[df.dtype == "bf16"]
    df = df.assign(n=df.point.map(lambda p: rows_of(p) * p["dim"]),
                   shape=df.point.map(lambda p: f"{rows_of(p)} x {p['dim']}"))
    lines = [probe_line(df), "",
             "| component | mode | shape | " + " | ".join(IMPLS) + " | goal |", "|---" * (len(IMPLS) + 4) + "|"]
    for comp, mode, least, pct in GOALS:
        d = df[(df.component == comp) & (df["mode"] == mode) & (df.n >= least)]
        for shape, g in sorted(d.groupby("shape"), key=lambda item: (item[1].n.iloc[0], item[0])):
            g = g.set_index("impl")
            cells = [f"{g.loc[i].median_ms * 1e3:,.1f} / {g.loc[i].gbps:,.0f} / {g.loc[i].roofline_pct:.0f}%"
                     if i in g.index else "" for i in IMPLS]
            t = g.loc["triton"]
            verdict = []
            if t.n >= 16 * M:
                verdict.append(f"{'met' if t.roofline_pct >= pct else 'MISSED'} >={pct}% ({t.roofline_pct:.1f}%)")
            if mode == "fwd" and comp != "softmax":
                faster = t.median_ms < min(g.loc["compile"].median_ms, g.loc["builtin"].median_ms)
                verdict.append("faster" if faster else "NOT faster")
            lines.append(f"| {comp} | {mode} | {shape} | " + " | ".join(cells) + " | " + ", ".join(verdict) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(sys.argv[1] if len(sys.argv) > 1 else "baselines/h200/norms.jsonl"))
