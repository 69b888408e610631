"""Issue 8's goal table from a norms results file: for each goal point, every implementation's median us / GB/s /
% of the calibrated roofline, and whether Triton meets the goal. The notes' tables since session 31 come from it.

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


def table(path: str) -> str:
    df = load([path])
    df = df[df.dtype == "bf16"]
    df = df.assign(n=df.point.map(lambda p: rows_of(p) * p["dim"]),
                   shape=df.point.map(lambda p: f"{rows_of(p)} x {p['dim']}"))
    lines = ["| component | mode | shape | " + " | ".join(IMPLS) + " | goal |", "|---" * (len(IMPLS) + 4) + "|"]
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
